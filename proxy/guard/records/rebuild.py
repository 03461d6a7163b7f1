"""Rebuilding the run state from the records: what a restart, a deploy or a lost Redis must not forget.

`rebuild` writes what `store.live.read_live` found into the state backend through the guard's own
fields (`accounting`, `breaker`), so the next request finds the day's spend of its key, its run's
counters and every breaker still open, as if the state had never been lost:

- a key's spend today (`KEY_DAY` `core.usd`);
- a live run's counters (`core.requests`, `core.usd`, `core.in`, `core.out`), when it began and was
  last seen;
- a run stopped for good (a detector that `stays_stopped`) latched again, whatever its age within the
  idle time; a breaker that heals (a key's upstream failures, a run's retries) open again for what is
  left of its cooldown, doubled per trip as `breaker.trip` does.

It merges rather than overwrites, so it may run over a state that kept part of its data (a Redis
replica promoted with the writes it had): numbers are raised to the records' figure, never lowered
(what the state counted beyond the records is newer), and a breaker is written only where none is.
Detector windows (hashes of recent calls) are not in the records: a rebuilt run's detectors start
their windows again, its caps, budgets and breakers do not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from runguard.config import BreakerSettings
from runguard.proxy.core.errors import StateFull
from runguard.proxy.core.ops import Add, Op, PutNX, Raise, Scope
from runguard.proxy.guard import breaker
from runguard.proxy.runs import Tenants, state_id
from runguard.proxy.state import ScopeIds, StateBackend
from runguard.proxy.store.live_facts import Live, LiveRun, LiveTrip

CONCURRENCY = 64  # batches in flight at once (Redis: round trips overlapped; memory: no await anyway)


@dataclasses.dataclass(frozen=True, slots=True)
class Rebuilt:
    """What a rebuild put back."""

    keys: int  # keys with spend today
    runs: int  # live runs with their counters
    breakers: int  # breakers open again (runs and keys)
    # Writes the state had no room for: a tenant's stopped runs past `runs.max_runs_per_tenant` (the limit was
    # lowered, keys were grouped). Their requests are refused as the tenant's new runs are, until reset.
    no_room: int = 0


def _ids(run_id: str = "", key_hash: str = "", key_model: str = "", day: str = "") -> ScopeIds:
    return ScopeIds(
        run=run_id, key=key_hash, key_model=key_model or f"{key_hash}|", key_day=f"{key_hash}|{day}", thread=run_id
    )


def _raised(figures: Sequence[tuple[Scope, str, float]], fresh: bool) -> list[Op]:
    """Each (scope, field) raised to its figure: what the state has beyond it stays. `fresh`: the state holds
    nothing yet, so an addition does (it costs less)."""
    if fresh:
        return [Add(scope, name, figure) for scope, name, figure in figures if figure]
    return [Raise(scope, name, figure) for scope, name, figure in figures]


def _record(trip: LiveTrip, latches: bool, cfg: BreakerSettings, now: float) -> breaker.BreakerRecord | None:
    """The breaker `trip` left, or None if it has closed since (its cooldown is over)."""
    cooldown = min(cfg.cooldown_seconds * 2 ** (trip.count - 1), cfg.max_cooldown_seconds)
    latched = latches and trip.scope == "run"
    if not latched and trip.at + cooldown <= now:
        return None
    return breaker.BreakerRecord(
        breaker.BreakerState.OPEN,
        trip.at,
        cooldown,
        trip.count,
        trip.detector,
        trip.reason,
        trip.request_index,
        latched=latched,
    )


async def rebuild(
    state: StateBackend,
    live: Live,
    *,
    tenants: Tenants,
    latches: Callable[[str], bool],
    breakers: BreakerSettings,
    now: float,
    fresh: bool = False,
) -> Rebuilt:
    """Write `live` into `state` (see the module docstring). `fresh`: the state is new and empty (a process
    that starts with in-memory state), so nothing in it is read first."""
    opened: dict[str, list[Op]] = {}  # ops per run (its breaker) and per key (their breakers)
    ids_of: dict[str, ScopeIds] = {}
    count = 0
    runs = {run.run_id: run for run in live.runs}
    for trip in live.trips:
        record = _record(trip, latches(trip.detector), breakers, now)
        run = runs.get(trip.run_id)
        if record is None or (trip.scope == "run" and run is None):
            continue
        count += 1
        if trip.scope == "run" and run is not None:
            # The tenant of the key that was stopped, not of the run's row: the store keeps one row per run id,
            # and two tenants may name runs alike (`X-Run-Id: main`); each one's stop stays its own.
            run_state = state_id(tenants.of(trip.key_hash), run.run_id)
            name, ids = f"run:{run_state}", _ids(run_id=run_state)
        else:
            name = f"{trip.scope}:{trip.target}"
            ids = _ids(key_hash=trip.key_hash, key_model=trip.target if trip.scope == "key_model" else "")
        scope = Scope.RUN if trip.scope == "run" else Scope(trip.scope)
        opened.setdefault(name, []).append(PutNX(scope, breaker.FIELD, record.dumps()))
        ids_of[name] = ids

    def jobs() -> Iterator[Awaitable[Any]]:  # made one at a time: 100,000 runs are not 100,000 coroutines at once
        # The stops first, then the spend, then the counters: after a failover the first batches done are the
        # ones that refuse requests, however many runs follow.
        for name, ops in opened.items():
            yield state.execute(ids_of[name], ops)
        for key_hash, usd in live.key_day_usd.items():
            ids = _ids(key_hash=key_hash, day=live.day)
            yield state.execute(ids, _raised([(Scope.KEY_DAY, "core.usd", usd)], fresh))
        for run in live.runs:
            ids = _ids(run_id=state_id(tenants.of(run.key_hash), run.run_id), key_hash=run.key_hash)
            seen = [
                PutNX(Scope.RUN, "core.started", repr(run.first_seen)),
                PutNX(Scope.RUN, "core.seen", repr(run.last_seen)),
            ]
            yield state.execute(ids, [*_raised(_counters(run), fresh), *seen])

    # Start-up work that makes many objects that live on: no collection passes over them meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        no_room = await _run_all(jobs())
    finally:
        if collecting:
            gc.enable()
    return Rebuilt(keys=len(live.key_day_usd), runs=len(live.runs), breakers=count, no_room=no_room)


def _counters(run: LiveRun) -> list[tuple[Scope, str, float]]:
    return [
        (Scope.RUN, "core.requests", float(run.requests)),
        (Scope.RUN, "core.usd", run.usd),
        (Scope.RUN, "core.in", float(run.input_tokens)),
        (Scope.RUN, "core.out", float(run.output_tokens)),
    ]


async def _run_all(jobs: Iterator[Awaitable[Any]]) -> int:
    """Await the jobs, at most CONCURRENCY at once; how many found no room (`StateFull`: skipped, the rest go on,
    so a proxy whose records hold more than its memory takes still starts)."""
    no_room = 0

    async def worker() -> None:
        nonlocal no_room
        for job in jobs:
            try:
                await job
            except StateFull:
                no_room += 1

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return no_room
