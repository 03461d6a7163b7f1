"""Writing batches to a SQLite file through one plain `sqlite3` connection on one thread.

The SQLAlchemy path (`batch.write` over aiosqlite) hops to aiosqlite's thread
and back for every statement, through SQLAlchemy's greenlet bridge, and builds
each statement's parameters in Python: on the proxy's default store that cost
more CPU per request than most detectors. Here a whole batch is one call into
the writer thread, with statements that are fixed strings, run with
`executemany`.

What goes in is what `batch.write` writes (the tests run both on the same
batches): the same columns, JSON as text, the same idempotence. A retried
batch adds nothing twice: the rows whose ids are already present are skipped
(looked up inside the write transaction), and run totals grow only by the
rows that went in. BEGIN IMMEDIATE takes the write lock up front, so another
process writing to the file waits (busy timeout) instead of failing mid-way.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import JSON, Table

from runguard.proxy.store.batch import ADDED_UP, Batch, Row, RunDelta, deltas_of, new_agents
from runguard.proxy.store.database import BUSY_TIMEOUT_MS, sqlite_pragmas
from runguard.proxy.store.models import Body, Request, RunAgent, Trip

_LATER = "excluded.exit_at IS NOT NULL AND (runs.exit_at IS NULL OR excluded.exit_at >= runs.exit_at)"
_RUN_UPSERT = (
    f"INSERT INTO runs ({', '.join(RunDelta.__slots__)}) VALUES ({', '.join('?' for _ in RunDelta.__slots__)})"
    " ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{name} = runs.{name} + excluded.{name}" for name in ADDED_UP)
    + ", first_seen = min(runs.first_seen, excluded.first_seen)"
    ", last_seen = max(runs.last_seen, excluded.last_seen)"
    f", exit_reason = CASE WHEN {_LATER} THEN excluded.exit_reason ELSE runs.exit_reason END"
    f", exit_at = CASE WHEN {_LATER} THEN excluded.exit_at ELSE runs.exit_at END"
)


class _Insert:
    """A table's INSERT ... ON CONFLICT DO NOTHING, and its rows as the statement binds them."""

    def __init__(self, table: Table) -> None:
        names = [column.name for column in table.columns]
        self.sql = (
            f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
            " ON CONFLICT DO NOTHING"
        )
        self._values = operator.itemgetter(*names)  # positional: sqlite3 binds names one lookup at a time
        self._json = tuple(column.name for column in table.columns if isinstance(column.type, JSON))

    def params(self, rows: Iterable[Row]) -> list[tuple[Any, ...]]:
        """The rows' values in column order, JSON columns encoded as SQLAlchemy stores them (text)."""
        values, json = self._values, self._json
        if not json:
            return [values(row) for row in rows]
        dumps = orjson.dumps
        return [values(row | {name: dumps(row[name]).decode() for name in json}) for row in rows]


_REQUESTS = _Insert(Request.__table__)  # type: ignore[arg-type]
_TRIPS = _Insert(Trip.__table__)  # type: ignore[arg-type]
_BODIES = _Insert(Body.__table__)  # type: ignore[arg-type]
_AGENTS = _Insert(RunAgent.__table__)  # type: ignore[arg-type]
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
        conn.executemany(_REQUESTS.sql, _REQUESTS.params(new_requests))
        conn.executemany(_TRIPS.sql, _TRIPS.params(new_trips))
        request_ids = {row["id"] for row in new_requests}
        bodies = [row for row in batch.bodies if row["request_id"] in request_ids]
        if bodies:
            conn.executemany(_BODIES.sql, _BODIES.params(bodies))
        deltas = deltas_of(batch, request_ids, {row["id"] for row in new_trips})
        agents = new_agents(batch, request_ids)
        known = _agents_present(conn, agents)
        agents = [agent for agent in agents if (agent["run_id"], agent["agent"]) not in known]
        conn.executemany(_AGENTS.sql, _AGENTS.params(agents))
        for agent in agents:
            deltas[agent["run_id"]].agents += 1
        conn.executemany(_RUN_UPSERT, [_RUN_FIELDS(deltas[run_id]) for run_id in sorted(deltas)])
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

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(
                self._path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, cached_statements=16
            )
            try:
                sqlite_pragmas(conn)  # as the engine's connections have them
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _write(self, batch: Batch) -> None:
        write_batch(self._connection(), batch)

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
