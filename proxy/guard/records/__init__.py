"""What a finished request leaves behind: its records, trip evidence, follow-up links, the rebuild."""
