"""QueueSink: batches, flush on close, bounded queue, idempotent retries, outages that end."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.exc import DataError

from runguard.proxy.store import QueueSink, StoreReader, batch, parse, writer
from runguard.proxy.store.postgres_writer import PostgresWriter
from runguard.proxy.store.sqlite_writer import SqliteWriter
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory, count, drop_schema
from tests.proxy.store.tcp_relay import TcpRelay
from tests.services import require_postgres, unique_name
from tests.support.upstream import closed_port


async def test_batches_add_up_to_the_records(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink(batch_size=7)
    assert sink.busy_seconds == 0
    for i in range(1, 31):
        sink.submit(factory.request(f"run-{i % 3}", index=(i + 2) // 3, at=factory.T0 + i))
    sink.submit(factory.trip("run-0", at=factory.T0 + 40))
    sink.submit(factory.trip("run-0", detector="tool_storm", action="warn", at=factory.T0 + 41))
    await sink.flush()
    assert (sink.written, sink.dropped, sink.backlog) == (32, 0, 0)
    assert sink.busy_seconds > 0  # the writer's time, runguard_stage_seconds_total{stage="records"}
    assert await count(store_url, "requests") == 30
    assert await count(store_url, "trips") == 2
    reader = StoreReader.on(sink.engine)
    runs = {run["run_id"]: run for run in await reader.runs.recent()}
    assert set(runs) == {"run-0", "run-1", "run-2"}
    run0 = runs["run-0"]
    assert run0["requests"] == 10 and run0["input_tokens"] == 1000 and run0["output_tokens"] == 200
    assert run0["cached_tokens"] == 100 and run0["usd"] == pytest.approx(0.01)
    assert run0["trips"] == 1 and run0["warnings"] == 1 and run0["usd_avoided"] == pytest.approx(0.097)
    assert run0["status"] == "tripped:non_progress" and run0["agents"] == ["planner"]
    assert run0["first_seen"] == factory.T0 + 3 and run0["last_seen"] == factory.T0 + 41


async def test_a_polled_background_response_adds_its_cost_to_its_run_not_a_request(
    make_sink: SinkFactory, store_url: str
) -> None:
    """A background response: its request is answered queued (nothing spent yet, the run still running); the
    poll that finds it finished is recorded under the same index, with its usage and cost."""
    sink = make_sink()
    queued = {"api": "responses", "tool_calls": (), "finish_reason": "queued", "usd": 0.0}
    sink.submit(factory.request("bg", 1, at=factory.T0 + 1, input_tokens=0, output_tokens=0, cached_tokens=0, **queued))
    await sink.flush()
    reader = StoreReader.on(sink.engine, clock=lambda: factory.T0 + 2)
    assert (await reader.runs.one("bg") or {})["status"] == "running"  # queued: not completed
    done = {"api": "responses", "tool_calls": (), "finish_reason": "completed", "usd": 0.45, "polled": True}
    sink.submit(factory.request("bg", 1, at=factory.T0 + 9, input_tokens=5000, output_tokens=700, **done))
    await sink.flush()
    run = await reader.runs.one("bg")
    assert run is not None and run["requests"] == 1 and run["status"] == "completed"
    assert (run["input_tokens"], run["output_tokens"], run["usd"]) == (5000, 700, pytest.approx(0.45))
    assert await count(store_url, "requests") == 2
    timeline = await reader.runs.timeline("bg") or []
    rows = [(r["index"], r["finish_reason"], r["usd"]) for r in timeline]
    assert rows == [(1, "queued", 0.0), (1, "completed", 0.45)]


async def test_close_flushes_everything_queued(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink(flush_interval=30.0, batch_size=1000)  # nothing would be written for 30 s
    await sink.migrated.wait()
    for i in range(1, 251):
        sink.submit(factory.request("run-close", index=i))
    assert sink.backlog == 250
    started = time.perf_counter()
    await sink.close()
    assert time.perf_counter() - started < 5
    assert await count(store_url, "requests") == 250


async def test_full_queue_drops_and_counts_without_blocking(store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    sink = QueueSink(store_url, queue_size=5, flush_interval=0.02)  # not started: nothing drains the queue
    with caplog.at_level("WARNING", logger="runguard.store"):
        for i in range(1, 9):
            sink.submit(factory.request("run-full", index=i))
        assert (sink.backlog, sink.dropped) == (5, 3)
        sink.start()
        await sink.flush()
        assert (sink.backlog, sink.dropped, sink.written) == (0, 3, 5)
        sink.submit(factory.request("run-full", index=9))  # room again
        await sink.close()
    assert await count(store_url, "requests") == 6
    said = [r.getMessage() for r in caplog.records if r.name == "runguard.store"]
    assert len(said) == 2  # once when dropping began, once when it ended: not once per record
    assert "5 records wait for the database" in said[0] and "new records are dropped" in said[0]
    assert "caught up; 3 records dropped" in said[1]


async def test_a_large_backlog_is_written_whole(make_sink: SinkFactory) -> None:
    """50,000 records queued at once all reach the database (bench/ measures the rates)."""
    sink = make_sink(queue_size=200_000)
    records = [factory.request("run-large", index=i) for i in range(1, 50_001)]
    for record in records:
        sink.submit(record)
    await sink.flush()
    assert (sink.written, sink.dropped, sink.backlog) == (len(records), 0, 0)


async def test_a_retried_batch_adds_nothing_twice(make_sink: SinkFactory, store_url: str) -> None:
    """The commit went through but the answer was lost: the retry must not double rows or totals."""
    sink = make_sink()
    await sink.migrated.wait()
    records = [factory.request("run-twice", index=i) for i in range(1, 6)] + [factory.trip("run-twice")]
    prepared = batch.build(records, iter(f"id-{n}" for n in range(100)), record_bodies=False)
    for _ in range(2):
        await sink.writer.write(prepared)
    run = await StoreReader.on(sink.engine).runs.one("run-twice")
    assert run is not None and run["requests"] == 5 and run["trips"] == 1 and run["agents"] == ["planner"]
    assert await count(store_url, "requests") == 5 and await count(store_url, "trips") == 1


async def test_a_row_the_database_rejects_is_dropped_alone(
    make_sink: SinkFactory, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = make_sink()
    real_write = sink.writer.write
    rejected = sink.writer.rejects[0]

    async def picky(prepared: batch.Batch) -> None:
        if any(row["run_id"] == "poison" for row, _ in prepared.requests):
            raise rejected("bad row") if rejected is not DataError else DataError("INSERT", {}, ValueError("bad"))
        await real_write(prepared)

    monkeypatch.setattr(sink.writer, "write", picky)
    for i in range(1, 4):
        sink.submit(factory.request("good", index=i))
    sink.submit(factory.request("poison", index=1))
    await sink.flush()
    assert (sink.written, sink.dropped) == (3, 1)
    assert await count(store_url, "requests") == 3


async def test_a_row_the_database_refuses_rolls_back_its_batch_and_only_it_is_dropped(store_url: str) -> None:
    """A real refusal (NOT NULL), through each database's own plain writer."""
    postgres = parse(store_url).postgres
    sink = QueueSink(store_url, flush_interval=0.02)
    assert isinstance(sink.writer, PostgresWriter if postgres else SqliteWriter)
    sink.start()
    try:
        await sink.migrated.wait()
        good = [factory.request("run-ok", i) for i in range(1, 4)]
        bad = factory.request("run-bad", 1, key_hash=None)  # NOT NULL: the database refuses the row
        prepared = batch.build([*good, bad], (f"b-{n}" for n in itertools.count()), record_bodies=False)
        with pytest.raises(asyncpg.NotNullViolationError if postgres else sqlite3.IntegrityError):
            await sink.writer.write(prepared)
        assert await count(store_url, "requests") == 0  # nothing of the failed batch stayed
        for record in (*good, bad):
            sink.submit(record)
        await sink.flush()
        assert (sink.written, sink.dropped) == (3, 1)
        assert await count(store_url, "requests") == 3
    finally:
        await sink.close()


async def test_strange_values_are_stored_not_retried_forever(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink()
    sink.submit(
        factory.request(
            "run-\x00odd", model="m\x00", input_tokens=2**70, usd=float("nan"), agent="", error="e" * 10_000
        )
    )
    sink.submit(factory.trip("run-\x00odd", evidence={"set": {1}, 2: b"x", "nul": "a\x00b"}))
    await sink.flush()
    assert (sink.written, sink.dropped, sink.failures) == (2, 0, 0)
    run = await StoreReader.on(sink.engine).runs.one("run-odd")
    assert run is not None and run["usd"] == 0.0 and run["agents"] == []


async def test_run_ids_too_long_to_keep_whole_stay_apart(make_sink: SinkFactory, store_url: str) -> None:
    """Two run ids alike for longer than the store keeps are two runs, each found by its own id."""
    alike = "run-" + "x" * 6000
    sink = make_sink()
    for suffix, requests in (("a", 2), ("b", 1)):
        for index in range(1, requests + 1):
            sink.submit(factory.request(alike + suffix, index, at=factory.T0 + index))
    sink.submit(factory.trip(alike + "b"))
    await sink.flush()
    reader = StoreReader.on(sink.engine)
    a, b = await factory.run_detail(reader.runs, alike + "a"), await factory.run_detail(reader.runs, alike + "b")
    assert a is not None and b is not None
    assert (a["run"]["requests"], len(a["requests"]), a["run"]["trips"]) == (2, 2, 0)
    assert (b["run"]["requests"], len(b["requests"]), len(b["trips"])) == (1, 1, 1)
    assert a["run"]["run_id"] != b["run"]["run_id"] and len(a["run"]["run_id"]) == batch.TEXT_LIMIT
    assert a["run"]["run_id"].startswith(alike[:4000])
    assert await reader.runs.one(alike) is None and await reader.runs.one(alike + "a" * 2) is None


async def test_lone_surrogates_are_stored_escaped_and_an_unwritable_record_is_dropped_alone(
    make_sink: SinkFactory, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Text no encoder takes (bytes that were not UTF-8, kept as surrogates) never stalls the writer."""
    odd = b"run-\xff".decode("utf-8", "surrogateescape")
    sink = make_sink()
    sink.submit(factory.request(odd, agent=odd, tool_calls=(odd,)))
    sink.submit(factory.trip("run-evidence", evidence={"agent": odd}))  # no JSON holds it: dropped, alone
    sink.submit(factory.request("run-after"))
    await sink.flush()
    assert (sink.written, sink.dropped, sink.failures) == (2, 1, 0)
    assert "dropped 1 records no row can hold" in caplog.text
    run = await StoreReader.on(sink.engine).runs.one("run-\\udcff")
    assert run is not None and run["agents"] == ["run-\\udcff"]
    assert await StoreReader.on(sink.engine).runs.one("run-after") is not None


async def test_sqlite_unavailable_at_first_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db" / "runguard.db"
    path.mkdir(parents=True)  # a directory where the file should be: SQLite cannot open it (even as root)
    sink = QueueSink(f"sqlite+aiosqlite:///{path}", flush_interval=0.02, max_backoff=0.2)
    sink.start()
    try:
        for i in range(1, 101):
            sink.submit(factory.request("run-outage", index=i))
        await asyncio.sleep(1.0)
        assert sink.failures > 0 and sink.backlog == 100 and not sink.migrated.is_set()
        path.rmdir()  # the database can be created now
        await asyncio.wait_for(sink.migrated.wait(), 10)
        for i in range(101, 151):
            sink.submit(factory.request("run-outage", index=i))
        await asyncio.wait_for(sink.flush(), 10)
        assert (sink.written, sink.dropped, sink.backlog) == (150, 0, 0)
    finally:
        await sink.close()
    assert await count(f"sqlite+aiosqlite:///{path}", "requests") == 150


@asynccontextmanager
async def postgres_behind_relay() -> AsyncIterator[tuple[TcpRelay, str, str]]:
    """A schema of the test's own, reached through a relay the test takes down or holds.

    Yields the relay (down until `up()`), the store URL through it, and the direct URL; the
    relay is taken down and the schema dropped afterwards.
    """
    base = require_postgres()
    schema = unique_name("rg_test")
    relay = TcpRelay(closed_port(), "127.0.0.1", 5432)
    url = base.replace("@127.0.0.1:5432/", f"@127.0.0.1:{relay.port}/") + f"?schema={schema}"
    assert f":{relay.port}/" in url
    try:
        yield relay, url, base + f"?schema={schema}"
    finally:
        await relay.down()
        await drop_schema(base, schema)


async def stored_requests(url: str, run_id: str) -> int:
    """The run's request count as the store's reader gives it."""
    reader = StoreReader.open(url)
    try:
        run = await reader.runs.one(run_id)
    finally:
        await reader.close()
    assert run is not None
    return int(run["requests"])


@pytest.mark.postgres
async def test_postgres_down_at_start_and_mid_way_loses_nothing() -> None:
    async with postgres_behind_relay() as (relay, url, direct):
        sink = QueueSink(url, flush_interval=0.02, max_backoff=0.2, batch_size=20)
        sink.start()
        try:
            for i in range(1, 51):
                sink.submit(factory.request("run-pg-outage", index=i))
            await asyncio.sleep(1.0)
            assert sink.failures > 0 and sink.backlog == 50  # port closed: connection refused
            await relay.up()
            await asyncio.wait_for(sink.flush(), 15)
            assert sink.written == 50
            await relay.down()  # the database goes away with connections open
            failures = sink.failures
            for i in range(51, 121):
                sink.submit(factory.request("run-pg-outage", index=i))
            await asyncio.sleep(1.0)
            assert sink.failures > failures and sink.backlog > 0
            await relay.up()
            await asyncio.wait_for(sink.flush(), 15)
            assert (sink.written, sink.dropped, sink.backlog) == (120, 0, 0)
        finally:
            await sink.close()
        assert await count(direct, "requests") == 120
        assert await stored_requests(direct, "run-pg-outage") == 120


@pytest.mark.postgres
async def test_a_postgres_write_that_times_out_is_retried_on_a_sound_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The database stops answering mid-write: the write times out and is retried once it answers again.

    Nothing is lost and nothing counts twice, and the connection the timed-out write left
    mid-statement does not poison the next ones.
    """
    monkeypatch.setattr(writer, "WRITE_TIMEOUT", 0.5)
    async with postgres_behind_relay() as (relay, url, direct):
        await relay.up()
        sink = QueueSink(url, flush_interval=0.02, max_backoff=0.2)
        sink.start()
        try:
            sink.submit(factory.request("run-pg-held", index=1))
            await asyncio.wait_for(sink.flush(), 15)
            relay.hold()
            for i in range(2, 12):
                sink.submit(factory.request("run-pg-held", index=i))
            for _ in range(100):  # the write in progress times out
                if sink.failures:
                    break
                await asyncio.sleep(0.05)
            assert sink.failures and sink.backlog == 10
            relay.release()
            await asyncio.wait_for(sink.flush(), 15)
            for i in range(12, 22):
                sink.submit(factory.request("run-pg-held", index=i))
            await asyncio.wait_for(sink.flush(), 15)
            assert (sink.written, sink.dropped, sink.backlog) == (21, 0, 0)
        finally:
            await sink.close()
        assert await stored_requests(direct, "run-pg-held") == 21
        assert await count(direct, "requests") == 21
