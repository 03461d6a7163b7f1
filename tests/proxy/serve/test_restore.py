"""`Restore` waits for the records before the proxy serves, and rebuilds the state from them."""

from __future__ import annotations

import asyncio

import pytest

from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.core.ops import Scope
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.serve import restore
from runguard.proxy.serve.restore import Restore
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.live_facts import Live, LiveRun, RecordsUnavailable

NOW = 1_800_000_000.0


def _restore(state: MemoryState, read: restore.ReadLive) -> Restore:
    settings = Settings()
    policy = Policy(default_detectors(), settings.guard)

    async def ready() -> None:
        return None

    return Restore(settings, state, policy, read, ready, clock=lambda: NOW)


async def test_a_store_that_does_not_answer_yet_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restore, "FIRST_RETRY", 0.001)
    calls: list[float] = []

    async def read(now: float) -> Live:
        calls.append(now)
        if len(calls) < 3:
            raise RecordsUnavailable("down")
        return Live("2027-01-15", {"k_a": 2.0}, [LiveRun("run-1", "k_a", NOW - 5, NOW - 1, 3, 0.1, 1, 1)])

    state = MemoryState()
    done = await _restore(state, read).run()
    assert (len(calls), done.runs, done.keys) == (3, 1, 1)
    assert (await state.read_scope(Scope.RUN, "k_a/run-1"))["core.requests"] == 3.0


async def test_a_fault_that_is_no_outage_stops_the_start() -> None:
    async def read(now: float) -> Live:
        raise KeyError("a bug, not a database that is down")

    with pytest.raises(KeyError):
        await asyncio.wait_for(_restore(MemoryState(), read).run(), 5)


async def test_the_record_backlog_lands_before_each_read_and_a_stuck_one_is_not_waited_for_ever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(restore, "FLUSH_SECONDS", 0.05)
    order: list[str] = []
    stuck = asyncio.Event()

    async def flush() -> None:
        order.append("flush")
        if len(order) > 2:
            await stuck.wait()  # a writer that never catches up

    async def read(now: float) -> Live:
        order.append("read")
        return Live("2027-01-15")

    settings = Settings()
    policy = Policy(default_detectors(), settings.guard)

    async def ready() -> None:
        return None

    again = Restore(settings, MemoryState(), policy, read, ready, lambda: NOW, flush=flush)
    await again.run()
    await asyncio.wait_for(again.run(), 5)
    assert order == ["flush", "read", "flush", "read"]
