from __future__ import annotations

from pathlib import Path

from runguard.detectors.registry import DETECTOR_CLASSES
from runguard.detectors.registry.catalogue import render

DOC = Path(__file__).resolve().parents[3] / "docs" / "detectors.md"


def test_docs_match_the_code() -> None:
    """docs/detectors.md is generated; regenerate with `runguard-proxy detectors > docs/detectors.md`."""
    assert DOC.read_text() == render()


def test_every_detector_and_setting_is_documented() -> None:
    text = render()
    for cls in DETECTOR_CLASSES:
        assert f"## `{cls.name}`" in text
        for field in cls.Config.model_fields:
            assert f"| `{field}` |" in text
