"""Queries over the record store: recent runs, one run's timeline and trips, trips by detector.

The admin API (`runguard.proxy.admin.api.StoreReader`) and the CLI read through
this class only. Results are plain dicts of JSON-ready values (times as epoch
seconds), so callers print or serve them without knowing SQLAlchemy.

A run's `status` is its stored exit reason (completed, tripped:<detector>,
error); a run whose last request left tool calls open is `running`, or `idle`
once `idle_seconds` have passed without a request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from sqlalchemy import Engine, Executable, case, distinct, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ColumnElement

from runguard.proxy.store import costs
from runguard.proxy.store.batch import stored_run_id
from runguard.proxy.store.database import make_engine, parse, sqlite_reader_engine
from runguard.proxy.store.models import RUN_TOTALS, Body, Request, Run, RunAgent, Trip

Row = dict[str, Any]

_RUN_COLUMNS = ("run_id", "key_hash", "first_seen", "last_seen", *RUN_TOTALS, "exit_reason")
_REQUEST_COLUMNS = (
    "request_index",
    "at",
    "agent",
    "model",
    "provider",
    "api",
    "streamed",
    "status",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "usage_estimated",
    "usd",
    "upstream_ms",
    "overhead_ms",
    "tool_calls",
    "handoff_to",
    "finish_reason",
    "blocked_by",
    "error",
    "verdicts",
)
_TRIP_COLUMNS = (
    "run_id",
    "detector",
    "action",
    "reason",
    "scope",
    "request_index",
    "at",
    "usd_so_far",
    "tokens_so_far",
    "usd_avoided",
    "evidence",
)
# A trip's cost avoided as every view counts it (`runguard.proxy.store.costs`): a warning avoids nothing, also when an
# older version stored an estimate for it.
COUNTED_AVOIDED = case((Trip.action == costs.BLOCK, Trip.usd_avoided), else_=0.0)


def trip_columns() -> list[ColumnElement[Any]]:
    """The trip columns every trip listing reads, `usd_avoided` as counted."""
    return [COUNTED_AVOIDED.label(name) if name == "usd_avoided" else getattr(Trip, name) for name in _TRIP_COLUMNS]


class StoreMissing(LookupError):
    """The URL names a SQLite file that does not exist (the reader never creates one)."""


class StoreReader:
    """Read-only queries on one engine (the writer's, inside the proxy; the CLI's own otherwise)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        idle_seconds: float = 3600.0,
        clock: Callable[[], float] = time.time,
        owns_engine: bool = False,
    ) -> None:
        self._engine = engine
        self._owns_engine = owns_engine
        self._idle_seconds = idle_seconds
        self._clock = clock
        path = parse(engine.url.render_as_string(hide_password=False)).sqlite_path
        self._plain = sqlite_reader_engine(path) if path is not None else None  # queries in one thread hop

    @classmethod
    def open(cls, database_url: str, *, idle_seconds: float = 3600.0) -> StoreReader:
        """A reader with its own engine (close it with `close()`); raises StoreMissing, ValueError."""
        target = parse(database_url)
        path = target.sqlite_path
        if path is not None and not path.exists():
            raise StoreMissing(f"no record store at {path} (the proxy creates it on its first start)")
        return cls(make_engine(target, create_dir=False), idle_seconds=idle_seconds, owns_engine=True)

    async def close(self) -> None:
        """Close the reader's connections (and its engine, when `open` made it)."""
        if self._plain is not None:
            self._plain.dispose()
        if self._owns_engine:
            await self._engine.dispose()

    @property
    def idle_seconds(self) -> float:
        """A run whose last request left tool calls open shows as `running` until this long, then `idle`."""
        return self._idle_seconds

    def now(self) -> float:
        return self._clock()

    async def read(self, *queries: Executable) -> list[list[Row]]:
        """Each query's rows as dicts, from one snapshot (for query modules such as `store.pages`)."""
        return await self._all(*queries)

    def runs_of(self, runs: list[Row], agent_rows: list[Row]) -> list[Row]:
        """Run rows (`_RUN_COLUMNS`) with their agents (`agents_of`), as `recent_runs` returns them."""
        return self._runs(runs, agent_rows)

    def _status(self, exit_reason: str | None, last_seen: float) -> str:
        if exit_reason:
            return exit_reason
        return "idle" if self._clock() - last_seen > self._idle_seconds else "running"

    async def _all(self, *queries: Executable) -> list[list[Row]]:
        """Each query's rows, all read in one transaction (one snapshot) and, on SQLite, one thread hop."""
        if self._plain is not None:
            return await asyncio.to_thread(self._plain_all, self._plain, queries)
        async with self._engine.connect() as conn:
            if len(queries) > 1:
                await conn.execution_options(isolation_level="REPEATABLE READ")
            return [[dict(row._mapping) for row in await conn.execute(query)] for query in queries]

    @staticmethod
    def _plain_all(engine: Engine, queries: Sequence[Executable]) -> list[list[Row]]:
        with engine.connect() as conn:
            return [[dict(row._mapping) for row in conn.execute(query)] for query in queries]

    @staticmethod
    def run_columns() -> list[ColumnElement[Any]]:
        return [getattr(Run, name) for name in _RUN_COLUMNS]

    @staticmethod
    def request_columns() -> list[ColumnElement[Any]]:
        return [getattr(Request, name) for name in _REQUEST_COLUMNS]

    @staticmethod
    def agents_of(runs: ColumnElement[bool]) -> Executable:
        return StoreReader._agents_of(runs)

    @staticmethod
    def indexed(requests: list[Row]) -> list[Row]:
        return StoreReader._indexed(requests)

    @staticmethod
    def _agents_of(runs: ColumnElement[bool]) -> Executable:
        """The agents of the runs `runs` picks, each run's in the order they first spoke."""
        return select(RunAgent.run_id, RunAgent.agent).where(runs).order_by(RunAgent.run_id, RunAgent.first_seen)

    def _runs(self, runs: list[Row], agent_rows: list[Row]) -> list[Row]:
        agents: dict[str, list[str]] = {row["run_id"]: [] for row in runs}
        for row in agent_rows:
            if row["run_id"] in agents:
                agents[row["run_id"]].append(row["agent"])
        return [self._run(row, agents[row["run_id"]]) for row in runs]

    def _run(self, row: Row, agents: list[str]) -> Row:
        row["agents"] = agents
        row["duration_s"] = round(row["last_seen"] - row["first_seen"], 3)
        row["status"] = self._status(row.pop("exit_reason"), row["last_seen"])
        return row

    async def recent_runs(self, limit: int = 50) -> list[Row]:
        """The runs seen last, newest first."""
        newest = select(Run.run_id).order_by(Run.last_seen.desc(), Run.run_id).limit(limit)
        columns = [getattr(Run, name) for name in _RUN_COLUMNS]
        runs = select(*columns).order_by(Run.last_seen.desc(), Run.run_id).limit(limit)
        rows, agents = await self._all(runs, self._agents_of(RunAgent.run_id.in_(newest)))
        return self._runs(rows, agents)

    @staticmethod
    def _one_run(run_id: str) -> tuple[Executable, Executable]:
        columns = [getattr(Run, name) for name in _RUN_COLUMNS]
        run_id = stored_run_id(run_id)
        return select(*columns).where(Run.run_id == run_id), StoreReader._agents_of(RunAgent.run_id == run_id)

    async def run(self, run_id: str) -> Row | None:
        rows, agents = await self._all(*self._one_run(run_id))
        return self._runs(rows, agents)[0] if rows else None

    @staticmethod
    def _timeline(run_id: str) -> Executable:
        columns = [getattr(Request, name) for name in _REQUEST_COLUMNS]
        return (
            select(*columns).where(Request.run_id == stored_run_id(run_id)).order_by(Request.at, Request.request_index)
        )

    @staticmethod
    def _indexed(requests: list[Row]) -> list[Row]:
        for row in requests:
            row["index"] = row.pop("request_index")
        return requests

    async def run_timeline(self, run_id: str) -> list[Row] | None:
        """The run's requests in order (for the admin API's run detail); None if none are stored."""
        (rows,) = await self._all(self._timeline(run_id))
        return self._indexed(rows) or None

    @staticmethod
    def _trips(limit: int, run_id: str | None = None) -> Executable:
        query = select(*trip_columns()).order_by(Trip.at.desc()).limit(limit)
        return query if run_id is None else query.where(Trip.run_id == stored_run_id(run_id))

    async def recent_trips(self, limit: int = 50, run_id: str | None = None) -> list[Row]:
        """Trips and warnings, newest first; of one run when `run_id` is given."""
        (rows,) = await self._all(self._trips(limit, run_id))
        return rows

    async def trips_by_detector(self, since: float | None = None) -> list[Row]:
        """Per detector: blocking trips, warnings, runs affected, estimated USD avoided, last trip."""
        blocked = func.sum(case((Trip.action == "block", 1), else_=0))
        query = (
            select(
                Trip.detector,
                blocked.label("trips"),
                func.sum(case((Trip.action == "block", 0), else_=1)).label("warnings"),
                func.count(distinct(Trip.run_id)).label("runs"),
                func.sum(COUNTED_AVOIDED).label("usd_avoided"),
                func.max(Trip.at).label("last_at"),
            )
            .group_by(Trip.detector)
            .order_by(blocked.desc(), Trip.detector)
        )
        if since is not None:
            query = query.where(Trip.at >= since)
        (rows,) = await self._all(query)
        for row in rows:
            row["trips"], row["warnings"] = int(row["trips"] or 0), int(row["warnings"] or 0)
            row["usd_avoided"] = float(row["usd_avoided"] or 0.0)
        return rows

    @staticmethod
    def _recorded_where(run_id: str | None, since: float | None) -> list[ColumnElement[bool]]:
        where = [] if run_id is None else [Body.run_id == stored_run_id(run_id)]
        return where if since is None else [*where, Body.at >= since]

    async def recorded_count(self, run_id: str | None = None, since: float | None = None) -> int:
        """How many exchanges `recorded()` would yield (for a progress bar)."""
        query = select(func.count()).select_from(Body).where(*self._recorded_where(run_id, since))
        (rows,) = await self._all(query)
        return int(next(iter(rows[0].values())))

    async def recorded(self, run_id: str | None = None, since: float | None = None) -> AsyncIterator[Row]:
        """Recorded traffic (store.record_bodies) in arrival order, of one run and/or since a time,
        streamed: bodies can be large."""
        query = (
            select(
                Body.run_id,
                Body.at,
                Body.path,
                Body.query,
                Body.status,
                Body.request,
                Body.response,
                Request.key_hash,
                Request.request_index,
                Request.agent,
                Request.model,
                Request.usd,
                Request.blocked_by,
                Request.error,
            )
            .join(Request, Request.id == Body.request_id)
            .order_by(Body.at, Request.request_index)
        )
        query = query.where(*self._recorded_where(run_id, since))
        async with self._engine.connect() as conn:
            result = await conn.stream(query.execution_options(yield_per=100))
            async for row in result:
                yield dict(row._mapping)
