"""The stage totals a passage adds to, as the metrics read them."""

from __future__ import annotations

from runguard.proxy.guard.stages import Stages


def test_totals_start_at_zero_and_read_by_stage_name() -> None:
    stages = Stages()
    assert stages.seconds() == {"admission": 0.0, "judging": 0.0}
    stages.admission += 0.25
    stages.judging += 0.5
    assert stages.seconds() == {"admission": 0.25, "judging": 0.5}
