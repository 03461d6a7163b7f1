"""The benchmark harness: measured figures, never asserted in tests (see bench/README.md)."""
