"""The rebuild writes the records' live figures into the state as the guard reads them."""

from __future__ import annotations

import pytest

from runguard.config.settings import BreakerSettings
from runguard.proxy.core.errors import StateFull
from runguard.proxy.core.ops import Add, Get, Put, Scope
from runguard.proxy.guard import accounting, breaker
from runguard.proxy.guard.records.rebuild import Rebuilt, rebuild
from runguard.proxy.runs.tenants import Tenants
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.live_facts import Live, LiveRun, LiveTrip

NOW = 1_800_000_000.0
CFG = BreakerSettings(cooldown_seconds=60.0, max_cooldown_seconds=900.0)
STOPS = {"max_requests": True, "retry_cascade": False}


def _ids(run: str = "", key: str = "k_a", key_model: str = "k_a|gpt-4o") -> ScopeIds:
    return ScopeIds(run=run, key=key, key_model=key_model, key_day=f"{key}|2027-01-15", thread=run)


def _run(run_id: str = "run-1", key: str = "k_a", requests: int = 4, usd: float = 0.5) -> LiveRun:
    return LiveRun(run_id, key, NOW - 300.0, NOW - 10.0, requests, usd, 400, 40)


def _trip(scope: str, target: str, detector: str, at: float, count: int = 1, run_id: str = "run-1") -> LiveTrip:
    return LiveTrip(scope, target, run_id, "k_a", detector, "why", 4, at, count)


async def _rebuild(state: MemoryState, live: Live, tenants: Tenants | None = None, fresh: bool = False) -> object:
    latches = lambda name: STOPS.get(name, True)  # noqa: E731
    return await rebuild(
        state, live, tenants=tenants or Tenants({}), latches=latches, breakers=CFG, now=NOW, fresh=fresh
    )


@pytest.mark.parametrize("fresh", [False, True])
async def test_the_guard_reads_back_spend_counters_and_breakers(fresh: bool) -> None:
    state = MemoryState()
    live = Live(
        "2027-01-15",
        {"k_a": 1.5},
        [_run()],
        [
            _trip("run", "run-1", "max_requests", NOW - 3000.0),  # latched: however old within the idle time
            _trip("key_model", "k_a|gpt-4o", "retry_cascade", NOW - 100.0, count=2),  # 120 s cooldown: open
            _trip("key", "k_a", "retry_cascade", NOW - 100.0),  # 60 s cooldown: closed since
        ],
    )
    done = await _rebuild(state, live, fresh=fresh)
    assert (done.keys, done.runs, done.breakers) == (1, 1, 2)  # type: ignore[attr-defined]
    got = await state.execute(_ids("k_a/run-1"), accounting.request_ops(NOW, "body"))
    facts, breakers = accounting.facts_from(got)
    assert (facts.request_index, facts.usd, facts.input_tokens, facts.output_tokens) == (5, 0.5, 400, 40)
    assert (facts.started_at, facts.key_day_usd) == (NOW - 300.0, 1.5)
    assert breakers.run is not None and breakers.run.latched and breakers.run.detector == "max_requests"
    assert breaker.gate(breakers.run, NOW + 10**6, 30.0).kind is breaker.GateKind.DENY
    assert breakers.key is None
    assert breakers.key_model is not None and not breakers.key_model.latched
    assert breakers.key_model.reopens_at() == NOW + 20.0


async def test_it_raises_figures_and_never_lowers_or_replaces_what_the_state_has() -> None:
    state = MemoryState()
    ids = _ids("k_a/run-1")
    newer = breaker.trip(
        None, detector="spiral", reason="r", now=NOW, request_index=9, base_cooldown=60, max_cooldown=900
    )
    await state.execute(ids, [Add(Scope.RUN, "core.requests", 9), Put(Scope.RUN, breaker.FIELD, newer.dumps())])
    await state.execute(ids, [Add(Scope.RUN, "core.usd", 0.1), Add(Scope.KEY_DAY, "core.usd", 3.0)])
    live = Live("2027-01-15", {"k_a": 1.0}, [_run()], [_trip("run", "run-1", "max_requests", NOW - 5.0)])
    await _rebuild(state, live)
    requests, usd, day, record = await state.execute(
        ids,
        [
            Get(Scope.RUN, "core.requests"),
            Get(Scope.RUN, "core.usd"),
            Get(Scope.KEY_DAY, "core.usd"),
            Get(Scope.RUN, breaker.FIELD),
        ],
    )
    assert (requests, usd, day) == (9.0, 0.5, 3.0)  # 9 > 4 kept; 0.1 raised to 0.5; 3.0 > 1.0 kept
    assert record == newer.dumps()


async def test_a_run_keeps_its_state_under_its_tenant() -> None:
    state = MemoryState()
    tenants = Tenants({"team": ("k_a", "k_b")})
    await _rebuild(state, Live("2027-01-15", {}, [_run()], []), tenants)
    assert (await state.read_scope(Scope.RUN, "team/run-1"))["core.requests"] == 4.0
    assert await state.read_scope(Scope.RUN, "k_a/run-1") == {}


async def test_a_stop_stays_with_the_tenant_that_was_stopped_when_another_names_a_run_alike() -> None:
    """Two keys (two tenants) both call their run `main`; the store keeps one row for the id (here k_a's). The
    stop recorded for k_b's run is rebuilt on k_b's run, not on k_a's: k_a goes on, k_b stays stopped."""
    state = MemoryState()
    stop = LiveTrip("run", "main", "main", "k_b", "max_requests", "why", 4, NOW - 30.0, 1)
    await _rebuild(state, Live("2027-01-15", {}, [_run("main", key="k_a")], [stop]))
    stopped = await state.read_scope(Scope.RUN, "k_b/main")
    assert breaker.BreakerRecord.loads(stopped[breaker.FIELD]) is not None
    assert breaker.FIELD not in await state.read_scope(Scope.RUN, "k_a/main")


async def test_stopped_runs_past_their_tenant_s_room_do_not_keep_the_proxy_from_starting() -> None:
    """Three of a tenant's runs stopped for good, and `runs.max_runs_per_tenant` lowered to 2 since: the rebuild
    puts back what fits, says what did not, and the third run finds no room on its next request either (it is
    refused, as the tenant's new runs are), rather than the restart failing every time."""
    state = MemoryState(max_runs_per_tenant=2, held=accounting.HELD_FIELDS)  # as `serve` makes it
    runs = [_run(f"run-{n}") for n in range(3)]
    stops = [_trip("run", f"run-{n}", "max_requests", NOW - 30.0, run_id=f"run-{n}") for n in range(3)]
    rebuilt = await _rebuild(state, Live("2027-01-15", {}, runs, stops), fresh=True)
    assert isinstance(rebuilt, Rebuilt) and rebuilt.no_room >= 1
    held = [n for n in range(3) if breaker.FIELD in await state.read_scope(Scope.RUN, f"k_a/run-{n}")]
    assert len(held) == 2
    (left_out,) = set(range(3)) - set(held)
    with pytest.raises(StateFull):
        await state.execute(_ids(f"k_a/run-{left_out}"), [Get(Scope.RUN, breaker.FIELD)])
