"""TripReader on SQLite and PostgreSQL: the newest trips (of one run), pages of them, sums per detector."""

from __future__ import annotations

import pytest

from tests.proxy.store import factory, readers
from tests.proxy.store.conftest import SinkFactory

T0 = factory.T0


async def test_trips_by_detector_with_cost_avoided(make_sink: SinkFactory) -> None:
    reader = await readers.a_day(make_sink)
    rows = await reader.trips.by_detector()
    assert [(r["detector"], r["trips"], r["warnings"], r["runs"]) for r in rows] == [
        ("spiral", 2, 0, 2),
        ("non_progress", 1, 0, 1),
        ("tool_storm", 0, 1, 1),
    ]
    assert rows[0]["usd_avoided"] == pytest.approx(0.5) and rows[2]["usd_avoided"] == 0.0
    assert [r["detector"] for r in await reader.trips.by_detector(since=T0 + 40.5)] == ["spiral"]
    recent = await reader.trips.recent(2)
    assert [t["run_id"] for t in recent] == ["spiral-b", "spiral-a"]
    assert [t["detector"] for t in await reader.trips.recent(10, "looped")] == ["tool_storm", "non_progress"]


async def test_trips_paged_and_a_warning_avoids_nothing(make_sink: SinkFactory) -> None:
    reader = await readers.many(make_sink)
    found = await reader.trips.page(None, 1, per_page=10)
    assert len(found.rows) == 10 and found.more and found.rows[0]["run_id"] == "run-117"
    warning = (await reader.trips.page("tool_storm")).rows[0]
    assert warning["action"] == "warn" and warning["usd_avoided"] == 0.0  # stored as 0.3, counted as 0
    summary = {row["detector"]: row for row in await reader.trips.by_detector()}
    assert summary["tool_storm"]["usd_avoided"] == 0.0 and summary["spiral"]["usd_avoided"] == pytest.approx(20)
