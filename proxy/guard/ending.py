"""A stream's end, marked pending in the shared state before its last bytes go out.

With a shared state (Redis) a request's end is judged after its answer went
out (`judging`), and a run's next request in the same process waits for it
(`Judging.settled`). A process knows nothing of another's pending ends, so
with `serve --workers N` or replicas a follow-up that a client sends the
moment it has a stream's last event (`[DONE]`, `response.completed`,
`message_stop`) could be admitted on another worker before the stream's
verdict was written: it slipped past the trip.

So before a stream's last bytes go to the client (`relay_stream`'s
`before_end`), the run is marked as having an end pending (`mark`: one round
trip, once per stream), and the mark is taken back once the end has run,
verdicts written (`unmark`). A request's admission batch reads the mark with
everything else (`READS`, two ops more in the same batch: admission stays one
round trip). A request that finds one pending (`settled`) waits, polling the
mark, until it is gone or at most `WAIT` seconds (a process that died
mid-end), then reads again what an end changes (the run's totals, the key's
spend, the breakers) and is judged on that: no follower slips, on any worker.
Parallel requests of a run wait only while one of its streams is ending.

With the in-memory state the state is the process's own, and so is the mark:
no op, the end counted pending by run in the process (`Judging.open`, as for
ends judged beside the relay), which the run's next request awaits before its
admission batch (`Judging.settled`, at most `WAIT` seconds). The stream's end is judged once the
upstream's body has ended, and that may come after the client has the last
event: without the mark, a client that fires its next request on another
connection the moment it has `[DONE]` was admitted before the verdict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runguard.proxy.core.ops import Add, Get, Op, OpResult, Put, Scope
from runguard.proxy.guard.batches import Batches
from runguard.proxy.state import ScopeIds

WAIT = 2.0  # seconds a mark holds at most (its end normally takes milliseconds)
POLL = 0.002  # seconds between looks at a mark while waiting
_COUNT, _UNTIL = "core.ending", "core.ending_until"
READS: tuple[Op, ...] = (Get(Scope.RUN, _COUNT), Get(Scope.RUN, _UNTIL))


def pending(count: OpResult, until: OpResult, now: float) -> bool:
    """Whether the mark (the results of `READS`) says an end of the run is pending now."""
    if not isinstance(count, float) or count <= 0 or not isinstance(until, str | float):
        return False
    try:
        return float(until) > now
    except ValueError:
        return False


class Ends:
    """Marks a run's stream ends pending for every process, and waits on them (see the module docstring)."""

    def __init__(self, batches: Batches, clock: Callable[[], float], refresh: Callable[[], list[tuple[int, Op]]]):
        self._batches = batches
        self._clock = clock
        self._refresh = refresh  # (index in the admission batch, op that reads its value again)

    async def mark(self, ids: ScopeIds) -> None:
        await self._batches.execute(
            ids, [Add(Scope.RUN, _COUNT, 1), Put(Scope.RUN, _UNTIL, repr(self._clock() + WAIT))]
        )

    async def unmark(self, ids: ScopeIds) -> None:
        await self._batches.execute(ids, [Add(Scope.RUN, _COUNT, -1)])

    async def settled(self, ids: ScopeIds, results: list[OpResult], at: int) -> list[OpResult]:
        """`results` of an admission batch (`READS`' results at `at`, `at + 1`), read again where an end
        changes them once no end of the run is pending."""
        if not pending(results[at], results[at + 1], self._clock()):
            return results
        deadline = self._clock() + WAIT
        while self._clock() < deadline:
            await asyncio.sleep(POLL)
            looked = await self._batches.execute(ids, list(READS))
            if looked is None or not pending(looked[0], looked[1], self._clock()):
                break
        places = self._refresh()
        again = await self._batches.execute(ids, [op for _, op in places])
        if again is None:
            return results
        fresh = list(results)
        for (index, _), value in zip(places, again, strict=True):
            fresh[index] = value
        return fresh
