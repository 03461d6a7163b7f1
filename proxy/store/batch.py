"""One batch of records as rows, and writing it in one transaction.

Writing is idempotent: every row carries an id chosen when the batch was
built, requests and trips are inserted with ON CONFLICT DO NOTHING, and the
run totals are incremented only for the rows that really went in (RETURNING).
So a batch retried after an ambiguous failure (the commit went through but
the connection broke before the answer) adds nothing twice, and two replicas
adding to one run never overwrite each other's totals: increments in ON
CONFLICT DO UPDATE apply to the newest committed row under its row lock.
Rows are sorted by run id so concurrent writers take row locks in one order
(no deadlocks).
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import JSON, Table, and_, case, or_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runguard.proxy.core.events import digest
from runguard.proxy.store.models import RUN_TOTALS, Body, Request, Run, RunAgent, Trip
from runguard.proxy.store.records import Record, RequestRecord, TripRecord

Row = dict[str, Any]
INT32 = 2**31 - 1
# The run columns a batch adds its own amounts to (the rest of a run row is kept or replaced by rule).
ADDED_UP = ("agents", *RUN_TOTALS)  # the run columns an upsert adds to (the agents counted apart from the pages)
INT64 = 2**63 - 1
TEXT_LIMIT = 4096  # characters kept of a client-supplied text
# A background response's status when its request is answered: it is polled until it is finished.
_UNFINISHED = frozenset({"queued", "in_progress"})


def run_conflict(smaller: str, larger: str) -> str:
    """The runs upsert's ON CONFLICT clause in SQL text, for writers that do not go through SQLAlchemy.

    `smaller`/`larger`: the dialect's two-argument minimum and maximum (SQLite `min`/`max`,
    PostgreSQL `LEAST`/`GREATEST`). The same rules as `_run_upsert`: amounts add up, the seen
    times widen, the latest outcome wins.
    """
    later = "excluded.exit_at IS NOT NULL AND (runs.exit_at IS NULL OR excluded.exit_at >= runs.exit_at)"
    return (
        " ON CONFLICT (run_id) DO UPDATE SET "
        + ", ".join(f"{name} = runs.{name} + excluded.{name}" for name in ADDED_UP)
        + f", first_seen = {smaller}(runs.first_seen, excluded.first_seen)"
        f", last_seen = {larger}(runs.last_seen, excluded.last_seen)"
        f", exit_reason = CASE WHEN {later} THEN excluded.exit_reason ELSE runs.exit_reason END"
        f", exit_at = CASE WHEN {later} THEN excluded.exit_at ELSE runs.exit_at END"
    )


def _text(value: str | None, limit: int = TEXT_LIMIT) -> str | None:
    """Client-supplied text as every database accepts it: no NUL characters, no lone surrogates
    (escaped as `\\udcff`: no encoder takes them), bounded length."""
    if value is None:
        return None
    if not value.isascii():
        value = value.encode("utf-8", "backslashreplace").decode()
    return value.replace("\x00", "")[:limit]


def stored_run_id(run_id: str) -> str:
    """A run id as the store keeps it (and looks it up): `_text`, but an id too long to keep whole
    keeps its beginning and a digest of all of it, so two long ids alike at the start stay two runs."""
    text = _text(run_id, sys.maxsize) or ""
    if len(text) <= TEXT_LIMIT:
        return text
    return f"{text[: TEXT_LIMIT - 33]}~{digest(text, 16)}"


def _num(value: float | None) -> float | None:
    """A finite float (NaN would become NULL on SQLite and break a NOT NULL column)."""
    if value is None:
        return None
    return float(value) if math.isfinite(value) else 0.0


def _int(value: int | None, limit: int = INT32) -> int | None:
    """An integer the column holds (a client or upstream could report anything)."""
    if value is None or (type(value) is int and -limit <= value <= limit):  # the usual case, at once
        return value
    return max(-limit, min(int(value), limit))


def _json(value: Any) -> Any:
    """Detector evidence as plain JSON: tuples become lists, anything else its str()."""
    raw = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).replace(b"\\u0000", b"")
    return orjson.loads(raw)


def outcome(record: RequestRecord) -> str | None:
    """What this request says about how its run ended; None while tool calls are still open."""
    if record.blocked_by:
        return f"tripped:{record.blocked_by}"
    blocking = next((v.detector for v in record.verdicts if v.action == "block"), None)
    if blocking:
        return f"tripped:{blocking}"
    if record.error or record.status is None or record.status >= 400:
        return "error"
    if not record.tool_calls and record.finish_reason is not None and record.finish_reason not in _UNFINISHED:
        return "completed"
    return None


def request_row(row_id: str, r: RequestRecord) -> Row:
    return {
        "id": row_id,
        "run_id": stored_run_id(r.run_id),
        "request_index": _int(r.index),
        "at": _num(r.at),
        "key_hash": r.key_hash,
        "agent": _text(r.agent, 256) or "",
        "model": _text(r.model, 256) or "",
        "provider": r.provider,
        "api": r.api,
        "streamed": r.streamed,
        "status": _int(r.status),
        "input_tokens": _int(r.input_tokens),
        "output_tokens": _int(r.output_tokens),
        "cached_tokens": _int(r.cached_tokens),
        "reasoning_tokens": _int(r.reasoning_tokens),
        "usage_estimated": r.usage_estimated,
        "usd": None if r.unpriced else _num(r.usd),
        "upstream_ms": _num(r.upstream_ms),
        "overhead_ms": _num(r.overhead_ms),
        "tool_calls": [_text(name, 256) for name in r.tool_calls],
        "handoff_to": _text(r.handoff_to, 256),
        "finish_reason": _text(r.finish_reason, 64),
        "blocked_by": r.blocked_by,
        "error": _text(r.error, 256),
        "verdicts": [{"detector": v.detector, "action": v.action, "reason": _text(v.reason)} for v in r.verdicts],
    }


def trip_row(row_id: str, t: TripRecord) -> Row:
    return {
        "id": row_id,
        "run_id": stored_run_id(t.run_id),
        "key_hash": t.key_hash,
        "detector": t.detector,
        "action": t.action,
        "reason": _text(t.reason) or "",
        "scope": t.scope,
        "request_index": _int(t.request_index),
        "at": _num(t.at),
        "usd_so_far": _num(t.usd_so_far),
        "tokens_so_far": _int(t.tokens_so_far, INT64),
        "usd_avoided": _num(t.usd_avoided_estimate),
        "evidence": _json(dict(t.evidence)),
    }


class Columns:
    """A table's columns, and rows as positional tuples in their order (for writers that bind by position)."""

    def __init__(self, table: Table) -> None:
        self.names = tuple(column.name for column in table.columns)
        self._values = operator.itemgetter(*self.names)
        self._json = tuple(column.name for column in table.columns if isinstance(column.type, JSON))

    def values(self, rows: Iterable[Row]) -> list[tuple[Any, ...]]:
        """The rows' values in column order, JSON columns encoded as SQLAlchemy stores them (text)."""
        values, json = self._values, self._json
        if not json:
            return [values(row) for row in rows]
        dumps = orjson.dumps
        return [values(row | {name: dumps(row[name]).decode() for name in json}) for row in rows]


@dataclass(slots=True)
class RunDelta:
    """What one batch adds to one run."""

    run_id: str
    key_hash: str
    first_seen: float
    last_seen: float
    agents: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    usd: float = 0.0
    unpriced: int = 0
    trips: int = 0
    warnings: int = 0
    usd_avoided: float = 0.0
    exit_reason: str | None = None
    exit_at: float | None = None

    def seen(self, at: float) -> None:
        self.first_seen = min(self.first_seen, at)
        self.last_seen = max(self.last_seen, at)

    def ends(self, at: float, reason: str | None) -> None:
        if self.exit_at is None or at >= self.exit_at:
            self.exit_at, self.exit_reason = at, reason

    def row(self) -> Row:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True)
class Batch:
    """Rows ready to insert; built once, so a retry reuses the same ids."""

    requests: list[tuple[Row, RequestRecord]] = field(default_factory=list)
    trips: list[tuple[Row, TripRecord]] = field(default_factory=list)
    bodies: list[Row] = field(default_factory=list)
    unbuilt: list[Exception] = field(default_factory=list)  # records no row could be made of (dropped)

    def __len__(self) -> int:
        return len(self.requests) + len(self.trips)


def build(records: Iterable[Record], ids: Iterator[str], *, record_bodies: bool) -> Batch:
    """The rows of `records`; a record with a value no row can hold is left out (in `unbuilt`), not the batch."""
    batch = Batch()
    for record in records:
        try:
            _add(batch, next(ids), record, record_bodies)
        except (TypeError, ValueError) as exc:
            batch.unbuilt.append(exc)
    return batch


def _add(batch: Batch, row_id: str, record: Record, record_bodies: bool) -> None:
    if not isinstance(record, RequestRecord):
        batch.trips.append((trip_row(row_id, record), record))
        return
    row = request_row(row_id, record)
    body = record.body
    if record_bodies and body is not None:
        batch.bodies.append(
            {
                "request_id": row_id,
                "run_id": row["run_id"],
                "at": row["at"],
                "path": body.path,
                "query": body.query,
                "status": _int(body.status),
                "request": body.request,
                "response": body.response,
            }
        )
    batch.requests.append((row, record))


def _insert(dialect: str, table: Any) -> Any:
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


async def _insert_new(conn: AsyncConnection, dialect: str, table: Any, rows: Sequence[Row], key: Any) -> set[Any]:
    """Insert `rows`, skipping ids already present; the keys of the rows that went in."""
    if not rows:
        return set()
    stmt = _insert(dialect, table).on_conflict_do_nothing().returning(key)
    result = await conn.execute(stmt, list(rows))
    return set(result.scalars().all())


def deltas_of(batch: Batch, new_requests: Collection[str], new_trips: Collection[str]) -> dict[str, RunDelta]:
    """What the rows that went in (by id) add to each run."""
    deltas: dict[str, RunDelta] = {}

    def delta(run_id: str, key_hash: str, at: float) -> RunDelta:
        found = deltas.get(run_id)
        if found is None:
            found = deltas[run_id] = RunDelta(run_id, key_hash, at, at)
        found.seen(at)
        return found

    for row, r in batch.requests:
        if row["id"] in new_requests:
            d = delta(row["run_id"], r.key_hash, row["at"])
            if not r.polled:  # a poll's record finishes a request counted already (`background`)
                d.requests += 1
            d.input_tokens += row["input_tokens"]
            d.output_tokens += row["output_tokens"]
            d.cached_tokens += row["cached_tokens"]
            if row["usd"] is None:
                d.unpriced += 1
            else:
                d.usd += row["usd"]
            d.ends(row["at"], outcome(r))
    for row, t in batch.trips:
        if row["id"] in new_trips:
            d = delta(row["run_id"], t.key_hash, row["at"])
            if t.action == "block":
                d.trips += 1
                d.usd_avoided += row["usd_avoided"]
                d.ends(row["at"], f"tripped:{t.detector}")
            else:
                d.warnings += 1
    return deltas


def new_agents(batch: Batch, new_requests: Collection[str]) -> list[Row]:
    """The run_agents rows the new requests name (each agent at its first time), in lock order."""
    agents: dict[tuple[str, str], float] = {}
    for row, _ in batch.requests:
        if row["id"] in new_requests and row["agent"]:
            pair = (row["run_id"], row["agent"])
            agents[pair] = min(agents.get(pair, row["at"]), row["at"])
    return [{"run_id": run, "agent": agent, "first_seen": at} for (run, agent), at in sorted(agents.items())]


def _run_upsert(dialect: str) -> Any:
    stmt = _insert(dialect, Run)
    new = stmt.excluded
    later = and_(new.exit_at.is_not(None), or_(Run.exit_at.is_(None), new.exit_at >= Run.exit_at))
    updates: dict[str, Any] = {name: getattr(Run, name) + getattr(new, name) for name in ADDED_UP}
    updates["first_seen"] = case((new.first_seen < Run.first_seen, new.first_seen), else_=Run.first_seen)
    updates["last_seen"] = case((new.last_seen > Run.last_seen, new.last_seen), else_=Run.last_seen)
    updates["exit_reason"] = case((later, new.exit_reason), else_=Run.exit_reason)
    updates["exit_at"] = case((later, new.exit_at), else_=Run.exit_at)
    return stmt.on_conflict_do_update(index_elements=[Run.run_id], set_=updates)


async def write(conn: AsyncConnection, batch: Batch) -> None:
    """Write `batch` inside the caller's transaction."""
    dialect = conn.dialect.name
    new_requests = await _insert_new(conn, dialect, Request, [row for row, _ in batch.requests], Request.id)
    new_trips = await _insert_new(conn, dialect, Trip, [row for row, _ in batch.trips], Trip.id)
    bodies = [row for row in batch.bodies if row["request_id"] in new_requests]
    if bodies:
        await conn.execute(_insert(dialect, Body).on_conflict_do_nothing(), bodies)
    deltas = deltas_of(batch, new_requests, new_trips)
    rows = new_agents(batch, new_requests)
    if rows:
        stmt = _insert(dialect, RunAgent).on_conflict_do_nothing().returning(RunAgent.run_id)
        for run_id in (await conn.execute(stmt, rows)).scalars().all():
            deltas[run_id].agents += 1
    if deltas:
        await conn.execute(_run_upsert(dialect), [deltas[run_id].row() for run_id in sorted(deltas)])


class EngineWriter:
    """Batches through a SQLAlchemy engine, one transaction each (PostgreSQL, in-memory SQLite)."""

    rejects: tuple[type[Exception], ...] = (DataError, IntegrityError)

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def write(self, batch: Batch) -> None:
        async with self._engine.begin() as conn:
            await write(conn, batch)

    async def close(self) -> None:
        """Nothing of its own to release: the engine is the sink's."""
