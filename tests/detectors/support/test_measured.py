"""`measured`: the corpus figures on docs/detectors.md add up and name real detectors."""

from __future__ import annotations

from runguard.detectors.registry import DETECTOR_CLASSES
from runguard.detectors.support import measured


def test_every_row_adds_up_and_names_a_detector() -> None:
    names = {cls.name for cls in DETECTOR_CLASSES}
    for row in measured.ROWS:
        assert row.detector in names
        assert row.stopped == row.progress + row.stuck + row.other
    assert sum(row.stuck for row in measured.ROWS) <= measured.STUCK
    assert {name for name, _ in measured.WARNINGS} <= names


def test_the_section_shows_the_false_stop_and_catch_rates_side_by_side() -> None:
    text = measured.render()
    header = next(line for line in text.splitlines() if line.startswith("| detector"))
    assert header.index("false-stop rate") < header.index("catch rate")
    total = next(line for line in text.splitlines() if line.startswith("| all"))
    stopped = sum(row.stopped for row in measured.ROWS)
    assert total.startswith(f"| all | {stopped} |")
