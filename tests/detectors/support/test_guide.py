"""The guide's sections say what the code does: the breakers that heal, and the detectors that refuse nudge."""

from __future__ import annotations

import re

from runguard.detectors.registry import DETECTOR_CLASSES
from runguard.detectors.registry.catalogue import render
from runguard.detectors.support import guide


def test_the_breakers_that_heal_are_the_detectors_whose_runs_do_not_stay_stopped() -> None:
    healing = guide.BREAKERS.split("**An upstream-health breaker**")[1]
    named = set(re.findall(r"`([a-z_]+)`", healing.split("heals")[0]))
    assert named == {cls.name for cls in DETECTOR_CLASSES if not cls.stays_stopped}


def test_the_page_ends_with_the_guide_and_says_per_detector_what_a_stop_opens() -> None:
    page = render()
    assert page.index("## Nudge") > page.index(f"## `{DETECTOR_CLASSES[-1].name}`")
    for cls in DETECTOR_CLASSES:
        section = page.split(f"## `{cls.name}`")[1].split("| setting |")[0]
        assert ("stays stopped" in section) is cls.stays_stopped
        assert ("`nudge` is not available" in section) is not cls.nudges


def test_the_evidence_table_lists_every_detector_once() -> None:
    listed = [name.strip("`") for name, _, _ in guide.BY_DETECTOR]
    assert sorted(listed) == sorted(cls.name for cls in DETECTOR_CLASSES)
