"""Writing batches to a SQLite file through one plain `sqlite3` connection on one thread.

The SQLAlchemy path (`batch.write` over aiosqlite) hops to aiosqlite's thread
and back for every statement, through SQLAlchemy's greenlet bridge, and builds
each statement's parameters in Python: on the proxy's default store that cost
more CPU per request than most detectors. Here a whole batch is one call into
the writer thread, with statements that are fixed strings.

Rows go in up to 128 a statement (`INSERT ... VALUES (...), (...)`), not one
statement per row. `sqlite3` lets go of the GIL around every statement, and
the writer thread then has to win it back from the event loop. A busy loop
lets go of the GIL itself at every socket call, so the waiting thread's
switch-interval timer keeps starting over, and it seldom gets in: one
statement per row (`executemany`) made the writer fall behind a saturated
proxy until its queue was full. A batch of 500 requests in 125 runs is now
23 statements, where it was 755.

What goes in is what `batch.write` writes (the tests run both on the same
batches): the same columns, JSON as text, the same idempotence. A retried
batch adds nothing twice: the rows whose ids are already present are skipped
(looked up inside the write transaction), and run totals grow only by the
rows that went in. BEGIN IMMEDIATE takes the write lock up front, so another
process writing to the file waits (busy timeout) instead of failing mid-way.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import sqlite3
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Table

from runguard.proxy.store.batch import Batch, Columns, Row, RunDelta, deltas_of, new_agents, run_conflict
from runguard.proxy.store.database import BUSY_TIMEOUT_MS, sqlite_pragmas
from runguard.proxy.store.models import Body, Request, RunAgent, Trip

MAX_ROWS = 128  # rows per INSERT statement (fewer when the connection's variable limit is lower)

_RUN_CONFLICT = run_conflict("min", "max")


class _MultiRow:
    """`INSERT INTO table (columns) VALUES (...), (...), ... <tail>`, for any number of rows.

    Rows go in up to `MAX_ROWS` per statement, and a remainder in its binary parts (e.g. 500
    rows: 128, 128, 128, 64, 32, 16, 4), so a table has at most eight statement texts, each
    prepared once and cached by the connection.
    """

    def __init__(self, table: str, columns: Sequence[str], tail: str, max_rows: int = MAX_ROWS) -> None:
        self._max_rows = max_rows
        self._head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
        self._row = f"({', '.join('?' for _ in columns)})"
        self._tail = tail
        self._columns = len(columns)
        self._texts: dict[int, str] = {}

    def _sql(self, rows: int) -> str:
        text = self._texts.get(rows)
        if text is None:
            text = self._texts[rows] = self._head + ", ".join(itertools.repeat(self._row, rows)) + self._tail
        return text

    def run(self, conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert `rows` (each a tuple in column order)."""
        size = self._max_rows
        while size > 1 and size * self._columns > conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER):
            size //= 2
        at = 0
        while at < len(rows):
            while size > len(rows) - at:
                size //= 2
            conn.execute(self._sql(size), list(itertools.chain.from_iterable(rows[at : at + size])))
            at += size


class _Insert:
    """A table's INSERT ... ON CONFLICT DO NOTHING."""

    def __init__(self, table: Table, max_rows: int = MAX_ROWS) -> None:
        self.columns = Columns(table)
        self.statement = _MultiRow(table.name, self.columns.names, " ON CONFLICT DO NOTHING", max_rows)

    def run(self, conn: sqlite3.Connection, rows: Iterable[Row]) -> None:
        self.statement.run(conn, self.columns.values(rows))


_REQUESTS = _Insert(Request.__table__)  # type: ignore[arg-type]
_TRIPS = _Insert(Trip.__table__)  # type: ignore[arg-type]
_BODIES = _Insert(Body.__table__, max_rows=8)  # type: ignore[arg-type]  # sqlite3 copies each bound body
_AGENTS = _Insert(RunAgent.__table__)  # type: ignore[arg-type]
_RUNS = _MultiRow("runs", RunDelta.__slots__, _RUN_CONFLICT)
_RUN_FIELDS = operator.attrgetter(*RunDelta.__slots__)


def _present(conn: sqlite3.Connection, table: str, ids: list[str]) -> set[str]:
    """Which of `ids` the table holds already (one statement whatever their number)."""
    if not ids:
        return set()
    sql = f"SELECT id FROM {table} WHERE id IN (SELECT value FROM json_each(?))"
    return {row[0] for row in conn.execute(sql, (orjson.dumps(ids).decode(),))}


def _agents_present(conn: sqlite3.Connection, agents: list[Row]) -> set[tuple[str, str]]:
    """Which of these (run, agent) pairs run_agents holds already."""
    if not agents:
        return set()
    runs = orjson.dumps(sorted({agent["run_id"] for agent in agents})).decode()
    sql = "SELECT run_id, agent FROM run_agents WHERE run_id IN (SELECT value FROM json_each(?))"
    return {(run_id, agent) for run_id, agent in conn.execute(sql, (runs,))}


def write_batch(conn: sqlite3.Connection, batch: Batch) -> None:
    """Write `batch` in one transaction on `conn` (autocommit mode: this function begins and commits).

    The lookups of what is present already and the inserts run under one write lock (BEGIN
    IMMEDIATE), so nothing can come in between.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        requests = [row for row, _ in batch.requests]
        trips = [row for row, _ in batch.trips]
        old_requests = _present(conn, "requests", [row["id"] for row in requests])
        old_trips = _present(conn, "trips", [row["id"] for row in trips])
        new_requests = [row for row in requests if row["id"] not in old_requests]
        new_trips = [row for row in trips if row["id"] not in old_trips]
        _REQUESTS.run(conn, new_requests)
        _TRIPS.run(conn, new_trips)
        request_ids = {row["id"] for row in new_requests}
        bodies = [row for row in batch.bodies if row["request_id"] in request_ids]
        if bodies:
            _BODIES.run(conn, bodies)
        deltas = deltas_of(batch, request_ids, {row["id"] for row in new_trips})
        agents = new_agents(batch, request_ids)
        known = _agents_present(conn, agents)
        agents = [agent for agent in agents if (agent["run_id"], agent["agent"]) not in known]
        _AGENTS.run(conn, agents)
        for agent in agents:
            deltas[agent["run_id"]].agents += 1
        _RUNS.run(conn, [_RUN_FIELDS(deltas[run_id]) for run_id in sorted(deltas)])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class SqliteWriter:
    """Batches into one SQLite file, on a thread of its own with its own connection."""

    rejects: tuple[type[Exception], ...] = (sqlite3.IntegrityError, sqlite3.DataError)

    def __init__(self, path: Path) -> None:
        self._path = path
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="runguard-store")
        self._conn: sqlite3.Connection | None = None  # opened, used and closed on the thread only
        self._closed = False
        self.cpu_seconds = 0.0  # CPU time of the writer thread's writes (runguard_stage_seconds_total)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(
                self._path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, cached_statements=64
            )
            try:
                sqlite_pragmas(conn)  # as the engine's connections have them
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _write(self, batch: Batch) -> None:
        began = time.thread_time()
        try:
            write_batch(self._connection(), batch)
        finally:
            self.cpu_seconds += time.thread_time() - began

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def write(self, batch: Batch) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._write, batch)

    async def close(self) -> None:
        """Close the connection once the write in progress (if any) is done; the thread ends with it."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        finally:
            self._thread.shutdown(wait=False)
