"""Judging beside the relay: with a networked state, a request's end runs after its answer, not in its handler.

A request's end (`Guard.complete`: usage and cost, the detectors' response
plans, breakers, the record, the access log line and the metrics) waits on
the state backend twice or so. With Redis, a handler that awaited it held its
connection for those round trips after the client had its answer: the next
request on that connection, whatever its run, waited for them. Here the end
starts as a task of its own and the handler returns at once:

- a run's next request waits for its run's pending ends (`settled`) before
  its state batch runs, on whatever connection it comes: no verdict is
  skipped. The usual request finds none, and pays a dict lookup;
- what finds a follow-up its run (a response id, the tasks a response's tool
  calls hand out) is written before the end starts (`Guard.remember`);
- at most `limit` ends are pending: past that a passage runs its end in its
  handler, so a state backend that cannot keep up slows the clients down
  rather than piling up work in memory;
- at shutdown `close` waits for what is left.

With the in-memory state the end has nothing to wait on: it runs in the
handler, after the answer's bytes went out (a queue there measured only its
own cost: docs/performance.md). Ends of different runs are not ordered with
each other: a verdict on an API key that one run's response trips applies to
another run's requests once that end has run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("runguard.guard")

LIMIT = 4096  # ends pending at most; past this, a passage runs its own end in its handler


class Judging:
    """The ends running beside the relay, by run (see the module docstring)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._by_run: dict[str, set[asyncio.Task[None]]] = {}  # ends not finished, per run
        self._pending = 0
        self.seconds = 0.0  # time the ends took (the `judging` stage of runguard_stage_seconds_total)

    def __len__(self) -> int:
        """Ends pending."""
        return self._pending

    def submit(self, run: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Start `work`, the end of a request in run `run` (its state id). False when `limit` ends are
        pending already: the caller runs it in place."""
        if self._pending >= self._limit:
            return False
        task = asyncio.get_running_loop().create_task(self._run(work), name="runguard-judging")
        self._by_run.setdefault(run, set()).add(task)
        self._pending += 1
        task.add_done_callback(lambda done: self._done(run, done))
        return True

    async def settled(self, run: str) -> None:
        """Once every end of `run` started so far has run."""
        tasks = self._by_run.get(run)
        if tasks:
            await asyncio.wait(set(tasks))  # the ends go on if this waiter is cancelled

    async def drained(self) -> None:
        """Once every end started so far has run."""
        tasks = self._all()
        if tasks:
            await asyncio.wait(tasks)

    async def close(self, within: float) -> None:
        """At shutdown: wait up to `within` seconds for the ends still running, then cancel them."""
        tasks = self._all()
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=within)
        if late:
            log.error("judging: %d ends not finished at shutdown (their records and accounting are lost)", len(late))
            for task in late:
                task.cancel()

    def _all(self) -> set[asyncio.Task[None]]:
        return {task for tasks in self._by_run.values() for task in tasks}

    async def _run(self, work: Callable[[], Awaitable[None]]) -> None:
        began = time.perf_counter()
        try:
            await work()
        except Exception:
            log.exception("judging a response failed")
        finally:
            self.seconds += time.perf_counter() - began

    def _done(self, run: str, task: asyncio.Task[None]) -> None:
        self._pending -= 1
        tasks = self._by_run.get(run)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del self._by_run[run]
