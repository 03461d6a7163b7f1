"""registry: the detectors the proxy runs, in order (`listing`), and their Markdown catalogue (`catalogue`).

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.detectors.registry.catalogue import Entry, entries, render
    from runguard.detectors.registry.listing import DETECTOR_CLASSES, config_model, default_detectors, validate_config

HOMES = {
    "DETECTOR_CLASSES": "listing",
    "Entry": "catalogue",
    "config_model": "listing",
    "default_detectors": "listing",
    "entries": "catalogue",
    "render": "catalogue",
    "validate_config": "listing",
}
__all__ = [
    "DETECTOR_CLASSES",
    "Entry",
    "config_model",
    "default_detectors",
    "entries",
    "render",
    "validate_config",
]

__getattr__ = lazy_face(__name__, HOMES)
