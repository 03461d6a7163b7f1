"""What the detectors stand on: the base types, normalizing, turns, sketches, shingles, tallies, the guide.

The names below are the face the proxy uses (`from runguard.detectors.support import Detector`); the modules
stay importable one by one, which is how the detectors themselves import them.
"""

from runguard.detectors.support.base import (
    Action,
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseKind,
    ResponseSeen,
    Results,
    RunFacts,
    ShownCall,
    Verdict,
)
from runguard.detectors.support.normalize import call_args_digest
from runguard.detectors.support.sketch import is_free_text
from runguard.detectors.support.turns import paired_results

__all__ = [
    "Action",
    "Detector",
    "DetectorConfig",
    "Evidence",
    "Plan",
    "RequestSeen",
    "ResponseKind",
    "ResponseSeen",
    "Results",
    "RunFacts",
    "ShownCall",
    "Verdict",
    "call_args_digest",
    "is_free_text",
    "paired_results",
]
