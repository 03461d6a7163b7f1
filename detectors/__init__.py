"""detectors: one module each, small pure classes that plan state ops and give verdicts.

The listing of this folder is the list of detectors, and two packages: `registry/` (their ordered list and
its Markdown catalogue: `from runguard.detectors.registry import default_detectors`) and `support/` (what
they stand on: `from runguard.detectors.support import Detector`).
"""
