"""StoreReader: runs with their status, a run's timeline and trips, trips by detector, recorded traffic."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import sqlalchemy as sa

from runguard.proxy.store import StoreReader
from runguard.proxy.store.database import make_engine, parse
from runguard.proxy.store.models import Request, Trip
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory

T0 = factory.T0


async def _fill(make_sink: SinkFactory, *, record_bodies: bool = False) -> StoreReader:
    sink = make_sink(record_bodies=record_bodies)
    # done: two tool turns, then a final answer
    sink.submit(factory.request("done", 1, at=T0 + 1, body=factory.body()))
    sink.submit(factory.request("done", 2, at=T0 + 2, agent="writer"))
    sink.submit(factory.request("done", 3, at=T0 + 3, tool_calls=(), finish_reason="stop"))
    # looped: the third response trips non_progress, the fourth request is answered locally
    for i in (1, 2):
        sink.submit(factory.request("looped", i, at=T0 + 10 + i))
    sink.submit(factory.request("looped", 3, at=T0 + 13, verdicts=(factory.verdict(),)))
    sink.submit(factory.trip("looped", at=T0 + 13.5, usd_avoided_estimate=0.5))
    sink.submit(factory.request("looped", 4, at=T0 + 14, blocked_by="non_progress", status=429, usd=0.0))
    sink.submit(factory.trip("looped", "tool_storm", "warn", at=T0 + 13.6))
    # failed: upstream error last
    sink.submit(factory.request("failed", 1, at=T0 + 20, status=502, error="UpstreamError", tool_calls=()))
    # waiting: tool calls open; quiet since T0 + 30
    sink.submit(factory.request("waiting", 1, at=T0 + 30))
    # spiralled: another detector, twice in two runs
    sink.submit(factory.trip("spiral-a", "spiral", at=T0 + 40, usd_avoided_estimate=0.25))
    sink.submit(factory.trip("spiral-b", "spiral", at=T0 + 41, usd_avoided_estimate=0.25))
    await sink.flush()
    return StoreReader(sink.engine, idle_seconds=600, clock=lambda: T0 + 100)


async def test_recent_runs_newest_first_with_their_status(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)
    runs = await reader.recent_runs(10)
    assert [r["run_id"] for r in runs] == ["spiral-b", "spiral-a", "waiting", "failed", "looped", "done"]
    status = {r["run_id"]: r["status"] for r in runs}
    assert status == {
        "spiral-b": "tripped:spiral",
        "spiral-a": "tripped:spiral",
        "waiting": "running",
        "failed": "error",
        "looped": "tripped:non_progress",
        "done": "completed",
    }
    done = runs[-1]
    assert done["agents"] == ["planner", "writer"] and done["requests"] == 3 and done["duration_s"] == 2.0
    assert [r["run_id"] for r in await reader.recent_runs(2)] == ["spiral-b", "spiral-a"]
    later = StoreReader(reader._engine, idle_seconds=600, clock=lambda: T0 + 1000)
    assert {r["run_id"]: r["status"] for r in await later.recent_runs()}["waiting"] == "idle"


async def test_run_detail_has_the_timeline_and_trips_in_order(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)
    detail = await factory.run_detail(reader, "looped")
    assert detail is not None
    assert detail["run"]["trips"] == 1 and detail["run"]["warnings"] == 1
    assert detail["run"]["usd_avoided"] == pytest.approx(0.5)
    assert [r["index"] for r in detail["requests"]] == [1, 2, 3, 4]
    third, fourth = detail["requests"][2:]
    assert third["verdicts"] == [{"detector": "non_progress", "action": "block", "reason": "same result 3 times"}]
    assert third["tool_calls"] == ["search"] and fourth["blocked_by"] == "non_progress" and fourth["status"] == 429
    assert [t["detector"] for t in detail["trips"]] == ["non_progress", "tool_storm"]
    assert detail["trips"][0]["evidence"] == {"tool": "search", "hashes": ["a1", "a1", "a1"]}
    assert await factory.run_detail(reader, "nope") is None
    assert await reader.run_timeline("nope") is None


def _delete_elsewhere(url: str, run_id: str) -> None:
    """Delete a run's requests and trips through a connection of another engine (on a thread of its own)."""

    async def delete() -> None:
        engine = make_engine(parse(url))
        try:
            async with engine.begin() as conn:
                await conn.execute(sa.delete(Request).where(Request.run_id == run_id))
                await conn.execute(sa.delete(Trip).where(Trip.run_id == run_id))
        finally:
            await engine.dispose()

    worker = threading.Thread(target=asyncio.run, args=(delete(),))
    worker.start()
    worker.join()


async def test_run_detail_reads_one_snapshot(make_sink: SinkFactory, store_url: str) -> None:
    """A write that lands while the detail is being read shows in none of its parts or in all of them."""
    reader = await _fill(make_sink)
    deleted: list[str] = []

    def delete_after_first_query(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not deleted and "FROM runs" in statement:
            deleted.append(statement)
            _delete_elsewhere(store_url, "looped")

    sa.event.listen(sa.Engine, "after_cursor_execute", delete_after_first_query)
    try:
        detail = await factory.run_detail(reader, "looped")
    finally:
        sa.event.remove(sa.Engine, "after_cursor_execute", delete_after_first_query)
    assert deleted, "the run was read"
    assert detail is not None and detail["run"]["requests"] == 4
    assert [r["index"] for r in detail["requests"]] == [1, 2, 3, 4]
    assert [t["detector"] for t in detail["trips"]] == ["non_progress", "tool_storm"]
    assert await reader.run_timeline("looped") is None, "the delete landed"


async def test_trips_by_detector_with_cost_avoided(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)
    rows = await reader.trips_by_detector()
    assert [(r["detector"], r["trips"], r["warnings"], r["runs"]) for r in rows] == [
        ("spiral", 2, 0, 2),
        ("non_progress", 1, 0, 1),
        ("tool_storm", 0, 1, 1),
    ]
    assert rows[0]["usd_avoided"] == pytest.approx(0.5) and rows[2]["usd_avoided"] == 0.0
    assert [r["detector"] for r in await reader.trips_by_detector(since=T0 + 40.5)] == ["spiral"]
    recent = await reader.recent_trips(2)
    assert [t["run_id"] for t in recent] == ["spiral-b", "spiral-a"]
    assert [t["detector"] for t in await reader.recent_trips(10, "looped")] == ["tool_storm", "non_progress"]


@pytest.mark.parametrize("record_bodies", [False, True])
async def test_bodies_only_when_recording_is_on(make_sink: SinkFactory, record_bodies: bool) -> None:
    reader = await _fill(make_sink, record_bodies=record_bodies)
    recorded = [row async for row in reader.recorded()]
    if not record_bodies:
        assert recorded == []
        return
    assert len(recorded) == 1
    row = recorded[0]
    assert row["run_id"] == "done" and row["path"] == "/v1/chat/completions" and row["request_index"] == 1
    assert row["request"] == factory.body().request and row["status"] == 200
