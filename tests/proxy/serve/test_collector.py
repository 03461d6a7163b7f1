"""`serve` leaves the collector at its serving thresholds, with start-up's objects frozen out of it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from runguard.proxy.serve import collector


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored")
def test_settle_freezes_start_up_and_collects_young_objects_less_often() -> None:
    survivor = [object() for _ in range(10)]  # start-up's objects: alive when serving starts
    gc.unfreeze()
    collector.settle()
    assert gc.get_threshold() == collector.THRESHOLDS
    assert gc.get_threshold()[0] > 700  # CPython's default walks the in-flight requests' objects 14 times as often
    assert gc.get_freeze_count() >= len(survivor)
