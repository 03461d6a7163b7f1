"""The marks a growing count is flagged at: its threshold, then each doubling of it, once each."""

from __future__ import annotations

from runguard.detectors.support.marks import marks


def test_a_count_growing_by_one_is_flagged_at_the_threshold_and_each_doubling() -> None:
    assert [count for count in range(1, 70) if marks(count, 8)] == [8, 16, 32, 64]


def test_a_count_that_jumps_past_a_mark_is_flagged_once() -> None:
    assert marks(10, 8, before=6)  # a batch of four calls went past 8
    assert not marks(12, 8, before=10)  # past 8 already, 16 not reached
    assert marks(17, 8, before=12) and not marks(17, 8, before=16)
