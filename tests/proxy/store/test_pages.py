"""The dashboard's queries (store.pages) on SQLite and PostgreSQL: paging, filters, spend per day, one run."""

from __future__ import annotations

import pytest

from runguard.proxy.admin.ui.past_days import PastDays
from runguard.proxy.store import StoreReader, pages
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory

T0 = factory.T0
DAY = 86400.0


async def _fill(make_sink: SinkFactory) -> StoreReader:
    """120 runs one second apart (newest last); every 3rd tripped by spiral, every 5th on key kh-b."""
    sink = make_sink(record_bodies=True)
    for n in range(120):
        run_id = f"run-{n:03d}"
        key = "kh-b" if n % 5 == 0 else "kh-a"
        finished = {"tool_calls": (), "finish_reason": "stop"} if n % 3 else {}
        model = "gpt-4o" if n % 2 else "gpt-4o-mini"
        body = factory.body() if n == 7 else None
        sink.submit(factory.request(run_id, 1, at=T0 + n, key_hash=key, model=model, body=body, **finished))
        if n % 3 == 0:
            sink.submit(factory.trip(run_id, "spiral", at=T0 + n + 0.5, key_hash=key, usd_avoided_estimate=0.5))
    sink.submit(factory.request("yesterday", 1, at=T0 - DAY, key_hash="kh-a", usd=0.25, tool_calls=()))
    sink.submit(factory.trip("run-001", "tool_storm", "warn", at=T0 + 1.5, usd_avoided_estimate=0.3))
    await sink.flush()
    return StoreReader(sink.engine, idle_seconds=600, clock=lambda: T0 + 200)


async def test_runs_are_paged_newest_first(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)
    first = await pages.runs(reader, pages.RunFilter(), 1, per_page=50)
    assert [r["run_id"] for r in first.rows[:2]] == ["run-119", "run-118"] and first.more
    third = await pages.runs(reader, pages.RunFilter(), 3, per_page=50)
    assert len(third.rows) == 21 and not third.more and third.rows[-1]["run_id"] == "yesterday"
    assert first.rows[0]["models"] == ["gpt-4o"] and first.rows[0]["agents"] == ["planner"]


async def test_runs_filter_by_status_key_detector_and_time(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)

    async def ids(**criteria: object) -> set[str]:
        found = await pages.runs(reader, pages.RunFilter(**criteria), per_page=500)  # type: ignore[arg-type]
        return {r["run_id"] for r in found.rows}

    tripped = {f"run-{n:03d}" for n in range(0, 120, 3)}
    assert await ids(status="tripped") == tripped
    assert await ids(detector="spiral") == tripped
    assert await ids(detector="tool_storm") == {"run-001"}  # a warning counts for the filter too
    assert await ids(key="kh-b") == {f"run-{n:03d}" for n in range(0, 120, 5)}
    assert await ids(status="completed", key="kh-b") == {f"run-{n:03d}" for n in range(0, 120, 5) if n % 3}
    assert await ids(since=T0 + 110) == {f"run-{n:03d}" for n in range(110, 120)}
    assert await ids(status="running") == set()  # every run has ended or was tripped
    assert await pages.count_live(reader) == 0


async def test_spend_by_day_and_keys(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)
    starts, rows = await pages.spend_by_day(reader, 7, "key_hash")
    today = len(starts) - 1
    by = {(row["day"], row["group"]): row["usd"] for row in rows}
    assert by[(today, "kh-b")] == pytest.approx(24 * 0.001) and by[(today, "kh-a")] == pytest.approx(96 * 0.001)
    assert by[(today - 1, "kh-a")] == pytest.approx(0.25)
    keys = await pages.keys(reader, 7)
    assert [key["key_hash"] for key in keys] == ["kh-a", "kh-b"] and keys[0]["requests"] == 97
    assert await pages.spend_today(reader, ["kh-a"]) == {"kh-a": pytest.approx(0.096)}


async def test_trips_paged_and_a_warning_avoids_nothing(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)
    found = await pages.trips(reader, None, 1, per_page=10)
    assert len(found.rows) == 10 and found.more and found.rows[0]["run_id"] == "run-117"
    warning = (await pages.trips(reader, "tool_storm")).rows[0]
    assert warning["action"] == "warn" and warning["usd_avoided"] == 0.0  # stored as 0.3, counted as 0
    summary = {row["detector"]: row for row in await reader.trips_by_detector()}
    assert summary["tool_storm"]["usd_avoided"] == 0.0 and summary["spiral"]["usd_avoided"] == pytest.approx(20)


async def test_one_run_with_its_recorded_body(make_sink: SinkFactory) -> None:
    reader = await _fill(make_sink)
    detail = await pages.run(reader, "run-007")
    assert detail is not None and detail["recorded"] == 1
    (step,) = detail["requests"]
    assert detail["bodies"][step["id"]]["path"] == "/v1/chat/completions"
    other = await pages.run(reader, "run-008")
    assert other is not None and other["recorded"] == 0 and other["bodies"] == {}
    assert await pages.run(reader, "no-such-run") is None


async def test_ended_days_are_read_once_and_today_every_time(make_sink: SinkFactory) -> None:
    """With a day cache, a record that arrives late for a day that has ended is not read again (it is past
    the settling time), while today's sums stay live."""
    reader = await _fill(make_sink)
    cache = PastDays()
    first = await pages.spend_by_day(reader, 7, "model", cache)
    assert first == await pages.spend_by_day(reader, 7, "model")  # the same figures as without a cache
    sink = make_sink()
    sink.submit(factory.request("late", 1, at=T0 - 2 * DAY, usd=5.0, model="gpt-4o", tool_calls=()))
    sink.submit(factory.request("now", 1, at=T0 + 150, usd=1.0, model="gpt-4o", tool_calls=()))
    await sink.flush()
    starts, rows = await pages.spend_by_day(reader, 7, "model", cache)
    by = {(row["day"], row["group"]): row["usd"] for row in rows}
    assert (len(starts) - 3, "gpt-4o") not in by  # the ended day came from the cache
    assert by[(len(starts) - 1, "gpt-4o")] == pytest.approx(60 * 0.001 + 1.0)  # today is read again
