"""Paged, indexed queries for the dashboard (`runguard.proxy.admin.ui`), over a `StoreReader`.

Every query reads a bounded range through an index (see the `ui_0002`
migration): a page of runs newest first (`runs.last_seen`, or by key or
outcome), trips newest first (`trips.at`), spend per day from the requests of
the last days (`requests.at` with key, model and cost in the index). Pages are
numbered from 1; each read asks for one row more than a page to know whether
another page follows, instead of counting every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Executable, case, func, select
from sqlalchemy.sql import ColumnElement

from runguard.proxy.store.batch import stored_run_id
from runguard.proxy.store.models import Body, Request, Run, RunAgent, Trip
from runguard.proxy.store.reader import Row, StoreReader, trip_columns

DAY = 86400.0
PER_PAGE = 50
STATUSES = ("running", "idle", "completed", "tripped", "error")


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What the runs list shows: None or "" for a criterion means any."""

    status: str | None = None  # one of STATUSES
    key: str | None = None  # a key hash, exactly
    detector: str | None = None  # runs with a trip or warning of this detector
    since: float | None = None  # runs active at or after this time (epoch seconds)


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[Row]
    page: int
    more: bool  # another page follows


def _status(reader: StoreReader, status: str) -> ColumnElement[bool]:
    if status == "tripped":
        return Run.exit_reason.like("tripped:%")
    if status in ("completed", "error"):
        return Run.exit_reason == status
    live_since = reader.now() - reader.idle_seconds
    newer = Run.last_seen > live_since if status == "running" else Run.last_seen <= live_since
    return Run.exit_reason.is_(None) & newer


def _run_conditions(reader: StoreReader, found: RunFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if found.status:
        conditions.append(_status(reader, found.status))
    if found.key:
        conditions.append(Run.key_hash == found.key)
    if found.detector:
        conditions.append(Run.run_id.in_(select(Trip.run_id).where(Trip.detector == found.detector)))
    if found.since is not None:
        conditions.append(Run.last_seen >= found.since)
    return conditions


def _models_of(run_ids: list[str]) -> Executable:
    query = select(Request.run_id, Request.provider, Request.model).where(Request.run_id.in_(run_ids))
    return query.group_by(Request.run_id, Request.provider, Request.model)


async def runs(reader: StoreReader, found: RunFilter, page: int = 1, per_page: int = PER_PAGE) -> Page:
    """One page of runs, newest activity first, each with its agents, models and providers."""
    query = (
        select(*reader.run_columns())
        .where(*_run_conditions(reader, found))
        .order_by(Run.last_seen.desc(), Run.run_id)
        .offset((page - 1) * per_page)
        .limit(per_page + 1)
    )
    (rows,) = await reader.read(query)
    rows, more = rows[:per_page], len(rows) > per_page
    ids = [row["run_id"] for row in rows]
    agents, models = await reader.read(reader.agents_of(RunAgent.run_id.in_(ids)), _models_of(ids)) if ids else ([], [])
    by_run: dict[str, list[tuple[str, str]]] = {run_id: [] for run_id in ids}
    for row in models:
        by_run[row["run_id"]].append((row["provider"], row["model"]))
    result = reader.runs_of(rows, agents)
    for row in result:
        served = sorted(by_run[row["run_id"]])
        row["models"] = sorted({model for _, model in served})
        row["providers"] = sorted({provider for provider, _ in served})
        row["served"] = [list(pair) for pair in served]  # (provider, model): whether each is priced is the views'
    return Page(result, page, more)


async def count_live(reader: StoreReader) -> int:
    """Runs still going: the last request left tool calls open within `idle_seconds`."""
    query = select(func.count()).select_from(Run).where(_status(reader, "running"))
    (rows,) = await reader.read(query)
    return int(next(iter(rows[0].values())))


async def trips(reader: StoreReader, detector: str | None = None, page: int = 1, per_page: int = PER_PAGE) -> Page:
    """One page of trips and warnings, newest first (optionally of one detector)."""
    query = select(*trip_columns(), Trip.key_hash).order_by(Trip.at.desc()).offset((page - 1) * per_page)
    if detector:
        query = query.where(Trip.detector == detector)
    (rows,) = await reader.read(query.limit(per_page + 1))
    return Page(rows[:per_page], page, len(rows) > per_page)


def day_start(at: float) -> float:
    """The start of the UTC day `at` falls in (the day a key's daily budget counts)."""
    return at - at % DAY


SETTLE = 300.0  # seconds after midnight UTC when a day has ended for `DayCache` (records arrive within seconds)


class DayCache(Protocol):
    """Where the sums of ended days are kept between pages (`runguard.proxy.admin.ui.past_days.PastDays`)."""

    def get(self, name: str, start: float) -> list[Row] | None: ...

    def put(self, name: str, start: float, rows: list[Row]) -> None: ...


async def _by_day(reader: StoreReader, starts: list[float], groups: list[str], past: DayCache | None) -> list[Row]:
    """Spend and requests per (day index into `starts`, *groups) since `starts[0]`; ended days from `past`."""
    now = reader.now()
    name = ",".join(groups)
    ended = [i for i, start in enumerate(starts) if past is not None and start + DAY + SETTLE <= now]
    kept = {i: past.get(name, starts[i]) for i in ended} if past is not None else {}
    read_from = next((i for i in range(len(starts)) if kept.get(i) is None), len(starts))
    rows: list[Row] = [row for i in range(read_from) for row in kept[i] or ()]
    if read_from < len(starts):
        bounds = list(enumerate(starts))[read_from:]
        day = case(*((Request.at >= start, index) for index, start in reversed(bounds)), else_=read_from)
        columns = [getattr(Request, group) for group in groups]
        query = (
            select(day.label("day"), *columns, func.sum(Request.usd).label("usd"), func.count().label("n"))
            .where(Request.at >= starts[read_from])
            .group_by(day, *columns)
        )
        (fresh,) = await reader.read(query)
        for row in fresh:
            row["usd"] = float(row["usd"] or 0.0)
        rows += fresh
        if past is not None:
            for i in ended:
                if i >= read_from:
                    past.put(name, starts[i], [row for row in fresh if row["day"] == i])
    return rows


async def spend_by_day(
    reader: StoreReader, days: int, by: str, past: DayCache | None = None
) -> tuple[list[float], list[Row]]:
    """Spend per UTC day over the last `days` days (today included), grouped by `by` ("key_hash" or "model").

    Returns the days' starts (oldest first) and rows of (day index into them, `group`: the `by` value, usd,
    requests). The day is a CASE over the days' bounds, the same on SQLite and PostgreSQL.
    """
    today = day_start(reader.now())
    starts = [today - DAY * back for back in range(days - 1, -1, -1)]
    rows = await _by_day(reader, starts, [by], past)
    return starts, [{"day": row["day"], "group": row[by], "usd": row["usd"], "n": row["n"]} for row in rows]


async def keys(reader: StoreReader, days: int, past: DayCache | None = None) -> list[Row]:
    """The keys that made requests in the last `days` UTC days: spend, requests and models, most spend first."""
    today = day_start(reader.now())
    starts = [today - DAY * back for back in range(days - 1, -1, -1)]
    found: dict[str, Row] = {}
    for row in await _by_day(reader, starts, ["key_hash", "model"], past):
        key = found.setdefault(row["key_hash"], {"key_hash": row["key_hash"], "usd": 0.0, "requests": 0, "models": []})
        key["usd"] += row["usd"]
        key["requests"] += int(row["n"])
        if row["model"] not in key["models"]:
            key["models"].append(row["model"])
    return sorted(found.values(), key=lambda key: (-key["usd"], key["key_hash"]))


async def spend_today(reader: StoreReader, key_hashes: list[str]) -> dict[str, float]:
    """Each key's spend since the start of this UTC day, from the store."""
    if not key_hashes:
        return {}
    query = (
        select(Request.key_hash, func.sum(Request.usd).label("usd"))
        .where(Request.at >= day_start(reader.now()), Request.key_hash.in_(key_hashes))
        .group_by(Request.key_hash)
    )
    (rows,) = await reader.read(query)
    return {row["key_hash"]: float(row["usd"] or 0.0) for row in rows}


async def run(reader: StoreReader, run_id: str, page: int = 1, per_page: int = 200) -> Row | None:
    """One run: totals, agents and models, one page of its requests in order (with the recorded bodies of
    those requests, when `store.record_bodies` kept them) and all its trips in order; None if unknown."""
    stored = stored_run_id(run_id)
    steps = (
        select(Request.id, *reader.request_columns())
        .where(Request.run_id == stored)
        .order_by(Request.at, Request.request_index)
        .offset((page - 1) * per_page)
        .limit(per_page + 1)
    )
    totals = select(*reader.run_columns()).where(Run.run_id == stored)
    found = select(*trip_columns()).where(Trip.run_id == stored).order_by(Trip.at)
    recorded = select(func.count()).select_from(Body).where(Body.run_id == stored)
    rows, agents, requests, trip_rows, bodies = await reader.read(
        totals, reader.agents_of(RunAgent.run_id == stored), steps, found, recorded
    )
    if not rows:
        return None
    requests, more = reader.indexed(requests[:per_page]), len(requests) > per_page
    ids = [row["id"] for row in requests]
    texts: dict[str, Row] = {}
    if ids and next(iter(bodies[0].values())):
        query = select(Body.request_id, Body.path, Body.request, Body.response).where(Body.request_id.in_(ids))
        (recorded_rows,) = await reader.read(query)
        texts = {row["request_id"]: row for row in recorded_rows}
    detail: dict[str, Any] = {
        "run": reader.runs_of(rows, agents)[0],
        "requests": requests,
        "trips": trip_rows,
        "bodies": texts,
        "recorded": int(next(iter(bodies[0].values()))),
        "page": page,
        "more": more,
    }
    return detail
