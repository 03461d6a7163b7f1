"""Which detectors run for a request, with which settings, and which of their hooks can act."""
