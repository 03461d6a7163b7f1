"""RunReader on SQLite and PostgreSQL: runs with their status, one run's timeline, pages of runs with filters,
one run's page read in one snapshot."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import sqlalchemy as sa

from runguard.proxy.store import RunFilter, StoreReader
from runguard.proxy.store.database import make_engine, parse
from runguard.proxy.store.models import Request, Trip
from tests.proxy.store import factory, readers
from tests.proxy.store.conftest import SinkFactory

T0 = factory.T0


async def test_recent_runs_newest_first_with_their_status(make_sink: SinkFactory) -> None:
    reader = await readers.a_day(make_sink)
    runs = await reader.runs.recent(10)
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
    assert [r["run_id"] for r in await reader.runs.recent(2)] == ["spiral-b", "spiral-a"]
    later = StoreReader.on(reader.reading.engine, idle_seconds=600, clock=lambda: T0 + 1000)
    assert {r["run_id"]: r["status"] for r in await later.runs.recent()}["waiting"] == "idle"
    assert (await reader.runs.one("waiting") or {})["status"] == "running"
    assert await reader.runs.one("nope") is None


async def test_run_detail_has_the_timeline_and_trips_in_order(make_sink: SinkFactory) -> None:
    reader = await readers.a_day(make_sink)
    detail = await factory.run_detail(reader.runs, "looped")
    assert detail is not None
    assert detail["run"]["trips"] == 1 and detail["run"]["warnings"] == 1
    assert detail["run"]["usd_avoided"] == pytest.approx(0.5)
    assert [r["index"] for r in detail["requests"]] == [1, 2, 3, 4]
    third, fourth = detail["requests"][2:]
    assert third["verdicts"] == [{"detector": "non_progress", "action": "block", "reason": "same result 3 times"}]
    assert third["tool_calls"] == ["search"] and fourth["blocked_by"] == "non_progress" and fourth["status"] == 429
    assert [t["detector"] for t in detail["trips"]] == ["non_progress", "tool_storm"]
    assert detail["trips"][0]["evidence"] == {"tool": "search", "hashes": ["a1", "a1", "a1"]}
    assert [r["index"] for r in await reader.runs.timeline("looped") or []] == [1, 2, 3, 4]
    assert await factory.run_detail(reader.runs, "nope") is None
    assert await reader.runs.timeline("nope") is None


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
    reader = await readers.a_day(make_sink)
    deleted: list[str] = []

    def delete_after_first_query(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not deleted and "FROM runs" in statement:
            deleted.append(statement)
            _delete_elsewhere(store_url, "looped")

    sa.event.listen(sa.Engine, "after_cursor_execute", delete_after_first_query)
    try:
        detail = await factory.run_detail(reader.runs, "looped")
    finally:
        sa.event.remove(sa.Engine, "after_cursor_execute", delete_after_first_query)
    assert deleted, "the run was read"
    assert detail is not None and detail["run"]["requests"] == 4
    assert [r["index"] for r in detail["requests"]] == [1, 2, 3, 4]
    assert [t["detector"] for t in detail["trips"]] == ["non_progress", "tool_storm"]
    assert await reader.runs.timeline("looped") is None, "the delete landed"


async def test_runs_are_paged_newest_first(make_sink: SinkFactory) -> None:
    reader = await readers.many(make_sink)
    first = await reader.runs.page(RunFilter(), 1, per_page=50)
    assert [r["run_id"] for r in first.rows[:2]] == ["run-119", "run-118"] and first.more
    third = await reader.runs.page(RunFilter(), 3, per_page=50)
    assert len(third.rows) == 21 and not third.more and third.rows[-1]["run_id"] == "yesterday"
    assert first.rows[0]["models"] == ["gpt-4o"] and first.rows[0]["agents"] == ["planner"]


async def test_runs_filter_by_status_key_detector_and_time(make_sink: SinkFactory) -> None:
    reader = await readers.many(make_sink)

    async def ids(**criteria: object) -> set[str]:
        found = await reader.runs.page(RunFilter(**criteria), per_page=500)  # type: ignore[arg-type]
        return {r["run_id"] for r in found.rows}

    tripped = {f"run-{n:03d}" for n in range(0, 120, 3)}
    assert await ids(status="tripped") == tripped
    assert await ids(detector="spiral") == tripped
    assert await ids(detector="tool_storm") == {"run-001"}  # a warning counts for the filter too
    assert await ids(key="kh-b") == {f"run-{n:03d}" for n in range(0, 120, 5)}
    assert await ids(status="completed", key="kh-b") == {f"run-{n:03d}" for n in range(0, 120, 5) if n % 3}
    assert await ids(since=T0 + 110) == {f"run-{n:03d}" for n in range(110, 120)}
    assert await ids(status="running") == set()  # every run has ended or was tripped
    assert await reader.runs.count_live() == 0


async def test_one_run_with_its_recorded_body(make_sink: SinkFactory) -> None:
    reader = await readers.many(make_sink)
    detail = await reader.runs.detail("run-007")
    assert detail is not None and detail["recorded"] == 1
    (step,) = detail["requests"]
    assert detail["bodies"][step["id"]]["path"] == "/v1/chat/completions"
    other = await reader.runs.detail("run-008")
    assert other is not None and other["recorded"] == 0 and other["bodies"] == {}
    assert await reader.runs.detail("no-such-run") is None


async def test_an_unpriced_request_keeps_no_cost_and_its_run_counts_it(make_sink: SinkFactory) -> None:
    sink = make_sink()
    sink.submit(factory.request("mixed", 1, usd=0.25))
    sink.submit(factory.request("mixed", 2, model="acme-coder-9", unpriced=True))
    sink.submit(factory.request("mixed", 3, model="acme-coder-9", unpriced=True, tool_calls=(), finish_reason="stop"))
    await sink.flush()
    reader = StoreReader.on(sink.engine)
    run = await reader.runs.one("mixed")
    assert run is not None and run["usd"] == pytest.approx(0.25) and run["unpriced"] == 2 and run["requests"] == 3
    assert [step["usd"] for step in await reader.runs.timeline("mixed") or []] == [pytest.approx(0.25), None, None]
    (listed,) = (await reader.runs.page(RunFilter())).rows
    assert listed["unpriced"] == 2 and listed["models"] == ["acme-coder-9", "gpt-4o-mini"]
