"""Runs as their readers see them: the newest, one run's totals and timeline, pages of runs, one run's page.

A run's `status` is its stored exit reason (completed, tripped:<detector>,
error); a run whose last request left tool calls open is `running`, or `idle`
once `idle_seconds` have passed without a request. Every page reads a bounded
range through an index (the `ui_0002` migration): runs newest first by
`runs.last_seen`, or by key or outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Executable, func, select
from sqlalchemy.sql import ColumnElement

from runguard.proxy.store.batch import stored_run_id
from runguard.proxy.store.models import RUN_TOTALS, Body, Request, Run, RunAgent, Trip
from runguard.proxy.store.reading import PER_PAGE, Page, Reading, Row
from runguard.proxy.store.trips import trip_columns

STATUSES = ("running", "idle", "completed", "tripped", "error")
RUN_COLUMNS = ("run_id", "key_hash", "first_seen", "last_seen", *RUN_TOTALS, "exit_reason")
REQUEST_COLUMNS = (
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


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What a list of runs shows: None or "" for a criterion means any."""

    status: str | None = None  # one of STATUSES
    key: str | None = None  # a key hash, exactly
    detector: str | None = None  # runs with a trip or warning of this detector
    since: float | None = None  # runs active at or after this time (epoch seconds)


def _run_columns() -> list[ColumnElement[Any]]:
    return [getattr(Run, name) for name in RUN_COLUMNS]


def _agents_of(runs: ColumnElement[bool]) -> Executable:
    """The agents of the runs `runs` picks, each run's in the order they first spoke."""
    return select(RunAgent.run_id, RunAgent.agent).where(runs).order_by(RunAgent.run_id, RunAgent.first_seen)


def _models_of(run_ids: list[str]) -> Executable:
    query = select(Request.run_id, Request.provider, Request.model).where(Request.run_id.in_(run_ids))
    return query.group_by(Request.run_id, Request.provider, Request.model)


def _indexed(requests: list[Row]) -> list[Row]:
    for row in requests:
        row["index"] = row.pop("request_index")
    return requests


class RunReader:
    """The runs of the record store (see the module docstring)."""

    def __init__(self, reading: Reading) -> None:
        self._reading = reading

    def _status(self, exit_reason: str | None, last_seen: float) -> str:
        if exit_reason:
            return exit_reason
        return "idle" if self._reading.now() - last_seen > self._reading.idle_seconds else "running"

    def _with_agents(self, runs: list[Row], agent_rows: list[Row]) -> list[Row]:
        agents: dict[str, list[str]] = {row["run_id"]: [] for row in runs}
        for row in agent_rows:
            if row["run_id"] in agents:
                agents[row["run_id"]].append(row["agent"])
        for row in runs:
            row["agents"] = agents[row["run_id"]]
            row["duration_s"] = round(row["last_seen"] - row["first_seen"], 3)
            row["status"] = self._status(row.pop("exit_reason"), row["last_seen"])
        return runs

    def _where_status(self, status: str) -> ColumnElement[bool]:
        if status == "tripped":
            return Run.exit_reason.like("tripped:%")
        if status in ("completed", "error"):
            return Run.exit_reason == status
        live_since = self._reading.now() - self._reading.idle_seconds
        newer = Run.last_seen > live_since if status == "running" else Run.last_seen <= live_since
        return Run.exit_reason.is_(None) & newer

    def _conditions(self, found: RunFilter) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = []
        if found.status:
            conditions.append(self._where_status(found.status))
        if found.key:
            conditions.append(Run.key_hash == found.key)
        if found.detector:
            conditions.append(Run.run_id.in_(select(Trip.run_id).where(Trip.detector == found.detector)))
        if found.since is not None:
            conditions.append(Run.last_seen >= found.since)
        return conditions

    async def recent(self, limit: int = 50) -> list[Row]:
        """The runs seen last, newest first."""
        newest = select(Run.run_id).order_by(Run.last_seen.desc(), Run.run_id).limit(limit)
        runs = select(*_run_columns()).order_by(Run.last_seen.desc(), Run.run_id).limit(limit)
        rows, agents = await self._reading.read(runs, _agents_of(RunAgent.run_id.in_(newest)))
        return self._with_agents(rows, agents)

    async def one(self, run_id: str) -> Row | None:
        """A run's totals, agents and status; None if unknown."""
        stored = stored_run_id(run_id)
        rows, agents = await self._reading.read(
            select(*_run_columns()).where(Run.run_id == stored), _agents_of(RunAgent.run_id == stored)
        )
        return self._with_agents(rows, agents)[0] if rows else None

    async def timeline(self, run_id: str) -> list[Row] | None:
        """The run's requests in order (for the admin API's run detail); None if none are stored."""
        columns = [getattr(Request, name) for name in REQUEST_COLUMNS]
        query = select(*columns).where(Request.run_id == stored_run_id(run_id))
        (rows,) = await self._reading.read(query.order_by(Request.at, Request.request_index))
        return _indexed(rows) or None

    async def page(self, found: RunFilter, page: int = 1, per_page: int = PER_PAGE) -> Page:
        """One page of runs, newest activity first, each with its agents, models and providers."""
        query = (
            select(*_run_columns())
            .where(*self._conditions(found))
            .order_by(Run.last_seen.desc(), Run.run_id)
            .offset((page - 1) * per_page)
            .limit(per_page + 1)
        )
        (rows,) = await self._reading.read(query)
        rows, more = rows[:per_page], len(rows) > per_page
        ids = [row["run_id"] for row in rows]
        read = self._reading.read
        agents, models = await read(_agents_of(RunAgent.run_id.in_(ids)), _models_of(ids)) if ids else ([], [])
        served: dict[str, tuple[set[str], set[str]]] = {run_id: (set(), set()) for run_id in ids}
        for row in models:
            served[row["run_id"]][0].add(row["model"])
            served[row["run_id"]][1].add(row["provider"])
        result = self._with_agents(rows, agents)
        for row in result:
            row["models"], row["providers"] = (sorted(names) for names in served[row["run_id"]])
        return Page(result, page, more)

    async def count_live(self) -> int:
        """Runs still going: the last request left tool calls open within `idle_seconds`."""
        return await self._reading.count(select(func.count()).select_from(Run).where(self._where_status("running")))

    async def detail(self, run_id: str, page: int = 1, per_page: int = 200) -> Row | None:
        """One run: totals, agents and models, one page of its requests in order (with the recorded bodies of
        those requests, when `store.record_bodies` kept them) and all its trips in order, read in one snapshot;
        None if unknown."""
        stored = stored_run_id(run_id)
        steps = (
            select(Request.id, *(getattr(Request, name) for name in REQUEST_COLUMNS))
            .where(Request.run_id == stored)
            .order_by(Request.at, Request.request_index)
            .offset((page - 1) * per_page)
            .limit(per_page + 1)
        )
        totals = select(*_run_columns()).where(Run.run_id == stored)
        found = select(*trip_columns()).where(Trip.run_id == stored).order_by(Trip.at)
        recorded = select(func.count()).select_from(Body).where(Body.run_id == stored)
        rows, agents, requests, trip_rows, bodies = await self._reading.read(
            totals, _agents_of(RunAgent.run_id == stored), steps, found, recorded
        )
        if not rows:
            return None
        requests, more = _indexed(requests[:per_page]), len(requests) > per_page
        ids = [row["id"] for row in requests]
        kept = int(next(iter(bodies[0].values())))
        texts: dict[str, Row] = {}
        if ids and kept:
            query = select(Body.request_id, Body.path, Body.request, Body.response).where(Body.request_id.in_(ids))
            (recorded_rows,) = await self._reading.read(query)
            texts = {row["request_id"]: row for row in recorded_rows}
        return {
            "run": self._with_agents(rows, agents)[0],
            "requests": requests,
            "trips": trip_rows,
            "bodies": texts,
            "recorded": kept,
            "page": page,
            "more": more,
        }
