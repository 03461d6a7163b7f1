"""`Watch` rebuilds a shared state that lost what it held, once, and serves once it is whole."""

from __future__ import annotations

import asyncio

from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.ops import Scope
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.serve.restore import Restore
from runguard.proxy.serve.watch import Watch
from runguard.proxy.state.generation import MARK_ID, Look
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.live_facts import Live, LiveRun

NOW = 1_800_000_000.0


def _watch(
    state: MemoryState, reads: list[float], flushed: list[bool] | None = None, read_done: asyncio.Event | None = None
) -> Watch:
    async def read(now: float) -> Live:
        reads.append(now)
        if read_done is not None:
            read_done.set()
        return Live("2027-01-15", {"k_a": 2.0}, [LiveRun("run-1", "k_a", NOW - 5, NOW - 1, 3, 0.1, 1, 1)])

    async def ready() -> None:
        return None

    async def flush() -> None:
        if flushed is not None:
            flushed.append(True)

    settings = Settings()
    policy = Policy(default_detectors(), settings.guard)
    restore = Restore(settings, state, policy, read, ready, lambda: NOW, flush=flush)
    return Watch(restore, state, 0.01, lambda: NOW)


async def test_one_replica_rebuilds_and_the_other_waits_for_it() -> None:
    state, reads, flushed = MemoryState(), [], []
    one, two = _watch(state, reads, flushed), _watch(state, reads)
    assert await one.check() is Look.LOST  # a new state: rebuilt, after the records in hand were written
    assert flushed == [True] and len(reads) == 1
    assert (await state.read_scope(Scope.RUN, "k_a/run-1"))["core.requests"] == 3.0
    assert await two.check() is Look.INTACT  # adopted: not rebuilt twice
    assert await one.check() is Look.INTACT
    await state.clear_scope(Scope.KEY, MARK_ID)  # Redis restarted empty
    assert await two.check() is Look.LOST and len(reads) == 2


async def test_the_watch_looks_again_until_stopped_and_an_outage_is_no_rebuild() -> None:
    state, reads, read_done = MemoryState(), [], asyncio.Event()
    watch = _watch(state, reads, read_done=read_done)
    await watch.at_start(None)  # type: ignore[arg-type]
    assert len(reads) == 1
    read_done.clear()
    await state.clear_scope(Scope.KEY, MARK_ID)
    await asyncio.wait_for(read_done.wait(), 5)  # the watch found it lost and rebuilt it
    await watch.stop(None)  # type: ignore[arg-type]

    class Down(MemoryState):
        async def execute(self, ids, ops):  # type: ignore[no-untyped-def]
            raise StateUnavailable("redis: down")

    down = _watch(Down(), reads)
    await down.at_start(None)  # type: ignore[arg-type]  # serves (fails open) rather than wait for Redis
    await down.stop(None)  # type: ignore[arg-type]
    assert len(reads) == 2
