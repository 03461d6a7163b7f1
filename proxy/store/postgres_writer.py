"""Writing batches to PostgreSQL through asyncpg itself, each table's rows as one set of arrays.

The SQLAlchemy path (`batch.write`) renders a multi-row INSERT per table and
runs every value of every row through its parameter processing in Python, on
the event loop: on PostgreSQL that cost more CPU per record than all the rest
of the store. Here each table's rows go in as one statement with one array
parameter per column (`INSERT ... SELECT * FROM unnest($1::varchar[], ...)`),
encoded by asyncpg's binary protocol, on a connection from the engine's own
pool (its schema, timeouts and pre-ping as configured there).

What goes in is what `batch.write` writes (the tests run both on the same
batches): the same rows, JSON as JSON, the same idempotence. Requests, trips
and agents are inserted with ON CONFLICT DO NOTHING RETURNING their keys, so
a retried batch adds to the run totals only for the rows that really went in;
runs are upserted with increments, in run-id order (row locks taken in one
order by every replica).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine

from runguard.proxy.store.batch import Batch, Columns, Row, deltas_of, new_agents, run_conflict
from runguard.proxy.store.models import Body, Request, Run, RunAgent, Trip

if TYPE_CHECKING:  # asyncpg is imported when a PostgreSQL store is made (a SQLite proxy starts without it)
    import asyncpg

_RUN_CONFLICT = run_conflict("LEAST", "GREATEST")


class _Unnest:
    """`INSERT INTO table (columns) SELECT * FROM unnest($1::type[], ...) <tail>`: any number of rows, one statement."""

    def __init__(self, table: Table, tail: str) -> None:
        self.columns = Columns(table)
        dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
        arrays = ", ".join(
            f"${i}::{column.type.compile(dialect=dialect)}[]" for i, column in enumerate(table.columns, start=1)
        )
        self.sql = f"INSERT INTO {table.name} ({', '.join(self.columns.names)}) SELECT * FROM unnest({arrays}){tail}"

    async def run(self, conn: asyncpg.Connection, rows: list[Row]) -> list[Any]:
        """Insert `rows`; the first column of what the statement returns (nothing without RETURNING)."""
        if not rows:
            return []
        arrays = zip(*self.columns.values(rows), strict=True)  # one sequence per column: the parameters
        records = await conn.fetch(self.sql, *arrays)
        return [record[0] for record in records]


_REQUESTS = _Unnest(Request.__table__, " ON CONFLICT DO NOTHING RETURNING id")  # type: ignore[arg-type]
_TRIPS = _Unnest(Trip.__table__, " ON CONFLICT DO NOTHING RETURNING id")  # type: ignore[arg-type]
_BODIES = _Unnest(Body.__table__, " ON CONFLICT DO NOTHING")  # type: ignore[arg-type]
_AGENTS = _Unnest(RunAgent.__table__, " ON CONFLICT DO NOTHING RETURNING run_id")  # type: ignore[arg-type]
_RUNS = _Unnest(Run.__table__, _RUN_CONFLICT)  # type: ignore[arg-type]


async def write_batch(conn: asyncpg.Connection, batch: Batch) -> None:
    """Write `batch` on `conn` in one transaction."""
    async with conn.transaction():
        new_requests = set(await _REQUESTS.run(conn, [row for row, _ in batch.requests]))
        new_trips = set(await _TRIPS.run(conn, [row for row, _ in batch.trips]))
        await _BODIES.run(conn, [row for row in batch.bodies if row["request_id"] in new_requests])
        deltas = deltas_of(batch, new_requests, new_trips)
        for run_id in await _AGENTS.run(conn, new_agents(batch, new_requests)):
            deltas[run_id].agents += 1
        await _RUNS.run(conn, [deltas[run_id].row() for run_id in sorted(deltas)])


class PostgresWriter:
    """Batches into PostgreSQL on connections of the engine's pool, one transaction each."""

    def __init__(self, engine: AsyncEngine) -> None:
        import asyncpg

        self._engine = engine
        # Class 22 (a value the column cannot hold; asyncpg raises it for values it cannot encode too)
        # and class 23 (a constraint): the rows, not the database.
        self.rejects: tuple[type[Exception], ...] = (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError)

    async def write(self, batch: Batch) -> None:
        async with self._engine.connect() as conn:
            raw = await conn.get_raw_connection()
            await write_batch(raw.driver_connection, batch)

    async def close(self) -> None:
        """Nothing of its own to release: the engine is the sink's."""
