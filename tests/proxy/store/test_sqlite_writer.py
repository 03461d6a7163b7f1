"""The plain-sqlite3 writer stores exactly what the SQLAlchemy writer stores, batch after batch."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from runguard.proxy.store import QueueSink, StoreReader, batch, make_engine, parse, upgrade
from runguard.proxy.store.sqlite_writer import SqliteWriter, write_batch
from tests.proxy.store import factory

TABLES = ("runs", "run_agents", "requests", "trips", "bodies")


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        return {table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr) for table in TABLES}


@pytest.fixture
async def two_stores(tmp_path: Path) -> tuple[Path, Path]:
    paths = (tmp_path / "plain.db", tmp_path / "alchemy.db")
    for path in paths:
        target = parse(f"sqlite+aiosqlite:///{path}")
        engine = make_engine(target)
        await upgrade(engine, target)
        await engine.dispose()
    return paths


async def test_both_writers_store_the_same_rows(two_stores: tuple[Path, Path]) -> None:
    plain_path, alchemy_path = two_stores
    plain = SqliteWriter(plain_path)
    engine = make_engine(parse(f"sqlite+aiosqlite:///{alchemy_path}"))
    alchemy = batch.EngineWriter(engine)
    ids = (f"id-{n}" for n in itertools.count())
    try:
        for records in factory.batches():
            prepared = batch.build(records, ids, record_bodies=True)
            await plain.write(prepared)
            await alchemy.write(prepared)
            await plain.write(prepared)  # a retried batch adds nothing
    finally:
        await plain.close()
        await engine.dispose()
    plain_rows, alchemy_rows = _dump(plain_path), _dump(alchemy_path)
    assert plain_rows == alchemy_rows
    assert [len(plain_rows[table]) for table in TABLES] == [3, 4, 7, 2, 1]


def _statements(path: Path, writes: Callable[[sqlite3.Connection], None]) -> list[str]:
    """The statements `writes` runs on a connection to `path`, as SQLite traces them."""
    conn = sqlite3.connect(path, isolation_level=None)
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        writes(conn)
    finally:
        conn.close()
    return seen


async def test_a_large_batch_goes_in_whole_with_a_few_statements(two_stores: tuple[Path, Path]) -> None:
    """Each table's rows go in with up to 128 rows a statement, not one statement per row.

    Every statement lets go of the GIL, and the writer thread has to win it back from a busy event
    loop each time: per-row statements made the writer fall behind a saturated proxy.
    """
    plain_path, alchemy_path = two_stores
    prepared = batch.build(factory.large_batch(), (f"id-{n}" for n in itertools.count()), record_bodies=True)
    statements = _statements(plain_path, lambda conn: write_batch(conn, prepared))
    inserts = [sql.split(" (")[0] for sql in statements if sql.startswith("INSERT")]
    # requests 301 = 128+128+32+8+4+1; trips 13 = 8+4+1; bodies (8 a statement) 301 = 8*37+4+1;
    # agents 226 (3 in each run, 1 in the last) = 128+64+32+2; runs 76 = 64+8+4
    assert sorted(set(inserts)) == [f"INSERT INTO {t}" for t in ("bodies", "requests", "run_agents", "runs", "trips")]
    assert inserts.count("INSERT INTO requests") == 6
    assert inserts.count("INSERT INTO bodies") == 39
    assert len(inserts) == 6 + 3 + 39 + 4 + 3
    engine = make_engine(parse(f"sqlite+aiosqlite:///{alchemy_path}"))
    try:
        await batch.EngineWriter(engine).write(prepared)
    finally:
        await engine.dispose()
    plain_rows, alchemy_rows = _dump(plain_path), _dump(alchemy_path)
    assert plain_rows == alchemy_rows
    assert [len(plain_rows[table]) for table in TABLES] == [76, 226, 301, 13, 301]


def test_a_low_variable_limit_takes_fewer_rows_a_statement(two_stores: tuple[Path, Path]) -> None:
    """A SQLite built with a small SQLITE_MAX_VARIABLE_NUMBER still takes the whole batch."""
    path = two_stores[0]
    prepared = batch.build(factory.large_batch(), (f"id-{n}" for n in itertools.count()), record_bodies=False)

    def limited(conn: sqlite3.Connection) -> None:
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # the limit before SQLite 3.32
        write_batch(conn, prepared)

    statements = _statements(path, limited)
    # 32 rows of 25 columns a statement: 301 = 32*9 + 8+4+1
    assert sum(sql.startswith("INSERT INTO requests") for sql in statements) == 9 + 3
    assert len(_dump(path)["requests"]) == 301


async def test_what_it_writes_reads_back(two_stores: tuple[Path, Path]) -> None:
    path = two_stores[0]
    writer = SqliteWriter(path)
    ids = (f"id-{n}" for n in itertools.count())
    try:
        for records in factory.batches():
            await writer.write(batch.build(records, ids, record_bodies=False))
    finally:
        await writer.close()
    engine = make_engine(parse(f"sqlite+aiosqlite:///{path}"))
    try:
        run = await StoreReader.on(engine).runs.one("run-a")
    finally:
        await engine.dispose()
    assert run is not None
    assert run["requests"] == 4 and run["trips"] == 1 and run["status"] == "tripped:non_progress"
    assert sorted(run["agents"]) == ["coder", "planner", "reviewer"]
    assert run["first_seen"] == factory.T0 - 5 and run["last_seen"] == factory.T0 + 20


def test_an_in_memory_database_goes_through_the_engine() -> None:
    sink = QueueSink("sqlite+aiosqlite://")
    assert isinstance(sink.writer, batch.EngineWriter)
