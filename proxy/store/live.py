"""What of the records is still live: the figures a rebuild of the run state starts from.

The records are the truth; the state (memory or Redis) is a fast copy of the part of them that
guards requests. When the state starts empty (a restart, a deploy) or lost writes (a Redis
failover), `read_live` reads back what must not be forgotten, bounded by the windows in which it
still matters:

- each key's spend for the current UTC day (`requests` by time: read from `ix_requests_at_spend`);
- every run seen within the run idle time, with its counters (`runs` by `last_seen`);
- the blocking trips of those runs and of keys within `since` (`trips` by time), with the model of
  a key+model trip (its request, by `ix_requests_run`);
- the resets since `since` (`resets` by time): what a reset released stays released, and a reset
  run's counters start again from its reset (its requests after it).

Every query is a range read of one index; nothing scans a whole table. What it reads comes back as plain
values (`live_facts`: a rebuild needs no SQLAlchemy).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TypeAlias

from sqlalchemy import Row, and_, func, select, tuple_
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runguard.proxy.store.live_facts import Live, LiveRun, LiveTrip, RecordsUnavailable
from runguard.proxy.store.models import Request, Reset, Run, Trip

CHUNK = 500  # ids per IN (...) of a follow-up query


def day_start(now: float) -> tuple[str, float]:
    """The UTC day of `now` and when it began (epoch seconds)."""
    day = time.gmtime(now)
    return time.strftime("%Y-%m-%d", day), float(calendar.timegm((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0)))


async def _resets(conn: AsyncConnection, since: float) -> dict[tuple[str, str], float]:
    rows = await conn.execute(
        select(Reset.scope, Reset.target, func.max(Reset.at))
        .where(Reset.at >= since)
        .group_by(Reset.scope, Reset.target)
    )
    return {(scope, target): float(at) for scope, target, at in rows}


async def _runs(conn: AsyncConnection, since: float, resets: dict[tuple[str, str], float]) -> list[LiveRun]:
    columns = (
        Run.run_id,
        Run.key_hash,
        Run.first_seen,
        Run.last_seen,
        Run.requests,
        Run.usd,
        Run.input_tokens,
        Run.output_tokens,
    )
    found = [LiveRun(*row) for row in await conn.execute(select(*columns).where(Run.last_seen >= since))]
    reset = {run.run_id for run in found if ("run", run.run_id) in resets}
    if not reset:
        return found
    # A reset cleared the run's counters: they start again from the requests after it (read by run, in chunks).
    since_reset: dict[str, LiveRun] = {}
    by_id = {run.run_id: run for run in found if run.run_id in reset}
    ids = sorted(by_id)
    columns_after = (Request.run_id, Request.at, Request.usd, Request.input_tokens, Request.output_tokens)
    for start in range(0, len(ids), CHUNK):
        rows = await conn.execute(select(*columns_after).where(Request.run_id.in_(ids[start : start + CHUNK])))
        for run_id, at, usd, tokens_in, tokens_out in rows:
            if at <= resets[("run", run_id)]:
                continue
            run = since_reset.get(run_id)
            if run is None:
                kept = by_id[run_id]
                run = since_reset[run_id] = LiveRun(run_id, kept.key_hash, at, kept.last_seen, 0, 0.0, 0, 0)
            run.first_seen = min(run.first_seen, at)
            run.requests += 1
            run.usd += usd or 0.0  # NULL: unpriced
            run.input_tokens += tokens_in
            run.output_tokens += tokens_out
    return [since_reset.get(run.run_id, run) for run in found if run.run_id not in reset or run.run_id in since_reset]


async def _key_day(conn: AsyncConnection, start: float) -> dict[str, float]:
    rows = await conn.execute(
        select(Request.key_hash, func.sum(Request.usd)).where(Request.at >= start).group_by(Request.key_hash)
    )
    return {key_hash: float(usd or 0.0) for key_hash, usd in rows}


async def _models(conn: AsyncConnection, requests: Sequence[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """The model of each key+model trip's request (its run id and index)."""
    pairs = list(set(requests))
    models: dict[tuple[str, int], str] = {}
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start : start + CHUNK]
        rows = await conn.execute(
            select(Request.run_id, Request.request_index, Request.model).where(
                tuple_(Request.run_id, Request.request_index).in_(chunk)
            )
        )
        models.update({(run_id, index): model for run_id, index, model in rows})
    return models


_TripRow: TypeAlias = "Row[str, str, str, str, str, int, float]"
_TRIP_COLUMNS = (Trip.run_id, Trip.key_hash, Trip.detector, Trip.reason, Trip.scope, Trip.request_index, Trip.at)


async def _stopped(conn: AsyncConnection, since: float) -> set[str]:
    """The runs seen since `since` whose last record was a stop (`exit_reason` `tripped:...`)."""
    rows = await conn.execute(select(Run.run_id).where(and_(Run.last_seen >= since, Run.exit_reason.like("tripped:%"))))
    return {run_id for (run_id,) in rows}


async def _older_run_trips(conn: AsyncConnection, since: float, runs: AbstractSet[str]) -> list[_TripRow]:
    """The run-scope stops before `since` of `runs`: a run that stays stopped (a latched stop) and is still
    refused keeps its run live with requests that write no trip, so its stop can be older than the window."""
    ids = sorted(runs)
    found: list[_TripRow] = []
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        rows = await conn.execute(
            select(*_TRIP_COLUMNS).where(
                and_(Trip.run_id.in_(chunk), Trip.at < since, Trip.action == "block", Trip.scope.in_(("run", "thread")))
            )
        )
        found.extend(rows.all())
    found.sort(key=lambda row: row.at)
    return found


async def _trips(
    conn: AsyncConnection,
    since: float,
    live_runs: set[str],
    resets: dict[tuple[str, str], float],
    stopped: AbstractSet[str] = frozenset(),
) -> list[LiveTrip]:
    window = select(*_TRIP_COLUMNS).where(and_(Trip.at >= since, Trip.action == "block")).order_by(Trip.at)
    rows = [*await _older_run_trips(conn, since, stopped & live_runs), *(await conn.execute(window)).all()]
    models = await _models(conn, [(t.run_id, t.request_index) for t in rows if t.scope == "key_model"])
    latest: dict[tuple[str, str], LiveTrip] = {}
    for t in rows:
        if t.scope in ("run", "thread"):
            if t.run_id not in live_runs:
                continue
            kind, target = "run", t.run_id
        elif t.scope == "key_model":
            model = models.get((t.run_id, t.request_index))
            if model is None:
                continue
            kind, target = "key_model", f"{t.key_hash}|{model}"
        else:
            kind, target = "key", t.key_hash
        if t.at <= resets.get((kind, target), float("-inf")):
            continue
        before = latest.get((kind, target))
        count = before.count + 1 if before is not None else 1
        latest[(kind, target)] = LiveTrip(
            kind, target, t.run_id, t.key_hash, t.detector, t.reason, t.request_index, t.at, count
        )
    return list(latest.values())


async def read_live(engine: AsyncEngine, now: float, *, idle_seconds: float, breaker_seconds: float) -> Live:
    """What of the records is live at `now`: runs seen within `idle_seconds`, today's spend per key, trips
    and resets within the longer of the two windows and `breaker_seconds` (the longest a key's breaker stays
    open)."""
    day, start = day_start(now)
    since = now - max(idle_seconds, breaker_seconds)
    try:
        async with engine.connect() as conn:
            resets = await _resets(conn, min(since, start))
            runs = await _runs(conn, now - idle_seconds, resets)
            live = Live(day, await _key_day(conn, start), runs, resets=len(resets))
            stopped = await _stopped(conn, now - idle_seconds)
            live.trips = await _trips(conn, since, {run.run_id for run in runs}, resets, stopped)
    except (SQLAlchemyError, OSError) as exc:
        raise RecordsUnavailable(f"record store: {exc}") from exc
    return live


__all__ = ["Live", "LiveRun", "LiveTrip", "RecordsUnavailable", "day_start", "read_live"]
