"""What in-memory state drops to make room (`bounds`), on a `MemoryState` with the guard's held fields.

Each test is a way another tenant, or junk, once pushed out a stop: the global bound dropped the least
recently used entry whatever it held. Now held entries (a breaker, a key's spend) wait out their idle
time, healthy ones go first, and a tenant at its own bound makes room among its own runs or is refused.
"""

from __future__ import annotations

import pytest

from runguard.proxy.core.errors import StateFull, StateUnavailable
from runguard.proxy.core.ops import Add, Get, Op, Put, Scope
from runguard.proxy.guard.accounting import HELD_FIELDS
from runguard.proxy.state.base import ScopeIds, ScopeTtls
from runguard.proxy.state.bounds import owner
from runguard.proxy.state.memory import MemoryState

STOP = Put(Scope.RUN, "breaker", '{"state": "open", "latched": true}')


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _ids(tenant: str, run: str) -> ScopeIds:
    return ScopeIds(run=f"{tenant}/{run}", key=tenant, key_model=f"{tenant}|m", key_day=f"{tenant}|2026-12-06")


async def _run(state: MemoryState, tenant: str, run: str, *more: Op) -> list[object]:
    return list(await state.execute(_ids(tenant, run), [Add(Scope.RUN, "core.requests"), *more]))


async def _requests(state: MemoryState, tenant: str, run: str) -> object:
    return (await state.read_scope(Scope.RUN, f"{tenant}/{run}")).get("core.requests")


def test_a_run_s_tenant_is_the_part_of_its_state_id_before_the_first_slash() -> None:
    assert owner("k_abc/run/with/slashes") == "k_abc"
    assert owner("team/r") == "team"


async def test_stops_and_spend_outlive_junk_that_fills_the_state_until_their_idle_time() -> None:
    clock = Clock()
    state = MemoryState(ScopeTtls(run=60.0, key_day=120.0), max_scopes=10, clock=clock, held=HELD_FIELDS)
    await _run(state, "a", "stopped", STOP, Add(Scope.KEY_DAY, "core.usd", 0.5))
    await _run(state, "a", "healthy")
    for i in range(40):  # junk: a new tenant and run each
        await _run(state, f"junk{i}", "r")
    assert (await state.read_scope(Scope.RUN, "a/stopped"))["breaker"] == STOP.value
    assert (await state.read_scope(Scope.KEY_DAY, "a|2026-12-06"))["core.usd"] == 0.5
    assert await _requests(state, "a", "healthy") is None  # idle and healthy: it went for room
    assert len(state) <= 10 + state.kept
    assert state.pressure.evicted > 30
    clock.now += 61.0  # the stop's idle time is over: forgotten at last, as any run is
    await _run(state, "junk-late", "r")
    assert await state.read_scope(Scope.RUN, "a/stopped") == {}


async def test_a_held_entry_used_again_rejoins_the_lru_and_goes_once_it_holds_nothing() -> None:
    state = MemoryState(max_scopes=4, held=HELD_FIELDS)
    await _run(state, "a", "r", STOP)
    for i in range(6):
        await _run(state, f"junk{i}", "r")
    assert state.kept == 1
    await _run(state, "a", "r", Put(Scope.RUN, "breaker", None))  # reset: holds nothing more
    assert state.kept == 0
    for i in range(6):
        await _run(state, f"junk-after{i}", "r")
    assert await _requests(state, "a", "r") is None


async def test_a_tenant_at_its_bound_drops_its_own_healthy_runs_then_is_refused() -> None:
    state = MemoryState(max_scopes=1000, held=HELD_FIELDS, max_runs_per_tenant=3)
    for i in range(3):
        await _run(state, "a", f"healthy{i}")
    await _run(state, "b", "other")
    await _run(state, "a", "stopped0", STOP)  # room made among a's own: its oldest healthy run
    assert await _requests(state, "a", "healthy0") is None
    assert await _requests(state, "a", "healthy1") == 1.0
    await _run(state, "a", "stopped1", STOP)
    await _run(state, "a", "stopped2", STOP)
    assert state.pressure.evicted_in_tenant == 3
    with pytest.raises(StateFull) as refused:
        await _run(state, "a", "one-more")
    assert isinstance(refused.value, StateUnavailable)
    assert "runs.max_runs_per_tenant" in str(refused.value)
    assert await _requests(state, "a", "one-more") is None  # nothing of the refused batch ran
    assert state.pressure.refused == 1
    assert await _run(state, "a", "stopped1", Get(Scope.RUN, "core.requests")) == [2.0, 2.0]  # its own: as ever
    assert await _requests(state, "b", "other") == 1.0  # another tenant is not touched
    await _run(state, "b", "second")
    assert await state.clear_scope(Scope.RUN, "a/stopped0")  # a reset makes room again
    await _run(state, "a", "one-more")
