"""`runguard-proxy detectors [NAME]`: the catalogue as terminal text that fits the terminal (a heading per
detector, never Markdown), one detector alone, `--json` as data, `--markdown` exactly docs/detectors.md,
and an unknown name refused with the known ones."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from runguard.detectors.registry import DETECTOR_CLASSES
from tests.proxy.cli.test_terminal import invoke

DOCS = Path(__file__).parents[3] / "docs"


@pytest.mark.parametrize("width", [80, 120])
def test_detectors_render_as_terminal_text_that_fits(width: int) -> None:
    done = invoke("detectors", width=width)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= width
    assert not any(line.startswith(("## ", "|")) for line in lines)  # not Markdown
    for cls in DETECTOR_CLASSES:
        assert cls.name in lines, cls.name  # a heading line per detector
    one = invoke("detectors", "spiral", width=width)
    text = " ".join(one.stdout.split())
    assert one.exit_code == 0 and "threshold 0.72 Jaccard similarity" in text and "non_progress" not in text


def test_detectors_json_markdown_and_unknown_names() -> None:
    data = orjson.loads(invoke("detectors", "--json").stdout)
    assert [item["name"] for item in data] == [cls.name for cls in DETECTOR_CLASSES]
    spiral = next(item for item in data if item["name"] == "spiral")
    threshold = next(s for s in spiral["settings"] if s["name"] == "threshold")
    assert threshold["default"] == 0.72 and threshold["tightenable"] is True and threshold["description"]
    assert [item["name"] for item in orjson.loads(invoke("detectors", "spiral", "--json").stdout)] == ["spiral"]
    assert invoke("detectors", "--markdown").stdout == (DOCS / "detectors.md").read_text()
    done = invoke("detectors", "nope")
    assert done.exit_code == 2 and "no detector 'nope' (known: budget," in done.stderr
