"""A stream's end marked pending for every process, and a follower that waits for it (`ending`).

The state is the in-memory one behind a `Batches`, as a second process would see Redis: one "process"
marks and unmarks, the other's admission results are read again once the mark is gone.
"""

from __future__ import annotations

import asyncio

from runguard.proxy.core.ops import Add, Get, Put, Scope
from runguard.proxy.guard import accounting, ending
from runguard.proxy.guard.batches import Batches
from runguard.proxy.guard.ending import Ends, pending
from runguard.proxy.guard.ticket import scope_ids
from runguard.proxy.state.memory import MemoryState

NOW = 1_000_000.0
IDS = scope_ids("k_a/run", "k_a", "gpt-4o-mini", NOW)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _ends(state: MemoryState, clock: Clock) -> Ends:
    batches = Batches(state, fail_closed=False, clock=clock, on_error=lambda: None)
    return Ends(batches, clock, accounting.refresh_ops)


async def _admission(state: MemoryState) -> list[object]:
    return list(await state.execute(IDS, accounting.request_ops(NOW, "h")))


def test_a_mark_is_pending_while_counted_and_before_its_deadline() -> None:
    assert pending(1.0, repr(NOW + 1), NOW)
    assert not pending(0.0, repr(NOW + 1), NOW)  # taken back
    assert not pending(1.0, repr(NOW - 1), NOW)  # its process died mid-end: it holds no longer
    assert not pending(None, None, NOW)
    assert not pending(1.0, "garbage", NOW)


async def test_a_follower_admitted_while_an_end_is_pending_is_judged_on_what_the_end_wrote() -> None:
    state, clock = MemoryState(), Clock()
    ends = _ends(state, clock)
    await ends.mark(IDS)
    results = await _admission(state)  # the follower's batch ran before the end's verdict was written
    assert pending(results[accounting.ENDING_AT], results[accounting.ENDING_AT + 1], clock())

    async def the_end() -> None:  # the other process: the stream's usage and the trip, then the mark taken back
        await state.execute(IDS, [Add(Scope.RUN, "core.in", 500.0), Put(Scope.RUN, "breaker", "tripped")])
        await ends.unmark(IDS)

    judged, _ = await asyncio.gather(ends.settled(IDS, results, accounting.ENDING_AT), the_end())
    facts, _ = accounting.facts_from(judged)
    assert facts.input_tokens == 500
    assert judged[9] == "tripped"  # the run's breaker, as the end left it
    assert (await state.execute(IDS, [Get(Scope.RUN, "core.ending")])) == [0.0]


async def test_without_a_pending_end_the_results_are_the_batch_s_and_nothing_more_is_read() -> None:
    state, clock = MemoryState(), Clock()
    results = await _admission(state)
    assert await _ends(state, clock).settled(IDS, results, accounting.ENDING_AT) is results
    assert accounting.request_ops(NOW, "h")[accounting.ENDING_AT :] == list(ending.READS)
