"""Judging: a request's end (usage, response detectors, breakers, record), run beside the relay.

With a networked state, a request's end runs after its answer, not in its handler.

A request's end (`Guard.complete`: usage and cost, the detectors' response
plans, breakers, the record, the access log line and the metrics) waits on
the state backend twice or so. With Redis, a handler that awaited it held its
connection for those round trips after the client had its answer: the next
request on that connection, whatever its run, waited for them. Here the end
starts as a task of its own and the handler returns at once:

- a run's next request waits for its run's pending ends (`settled`) before
  its state batch runs, on whatever connection it comes: no verdict is
  skipped. The usual request finds none, and pays a dict lookup;
- the end is counted as pending (`open`) before anything awaits; then what
  finds a follow-up its run (a response id, the tasks a response's tool calls
  hand out: `Guard.remember`) is written by the handler itself, at once, and
  the rest starts in its own task (`start`);
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
from collections.abc import Awaitable, Callable

log = logging.getLogger("runguard.guard")

LIMIT = 4096  # ends pending at most; past this, a passage runs its own end in its handler


class Judging:
    """The ends running beside the relay, by run (see the module docstring)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._by_run: dict[str, set[asyncio.Future[None]]] = {}  # ends not finished, per run
        self._running: dict[asyncio.Future[None], asyncio.Task[None]] = {}
        self._pending = 0  # ends counted and not finished, in all runs

    def __len__(self) -> int:
        """Ends pending."""
        return self._pending

    def open(self, run: str) -> asyncio.Future[None] | None:
        """Count an end of run `run` (its state id) as pending from now on, before its caller has started
        it (`start`); None when `limit` ends are pending already: the caller runs it in place."""
        if self._pending >= self._limit:
            return None
        end = asyncio.get_running_loop().create_future()
        self._by_run.setdefault(run, set()).add(end)
        self._pending += 1
        end.add_done_callback(lambda done: self._done(run, done))
        return end

    def start(self, end: asyncio.Future[None], work: Callable[[], Awaitable[None]]) -> None:
        """Run `work` in a task of its own; `end` (from `open`) is done when it is."""
        task = asyncio.get_running_loop().create_task(self._run(work, end), name="runguard-judging")
        self._running[end] = task

    def submit(self, run: str, work: Callable[[], Awaitable[None]]) -> bool:
        """`open` and `start` at once; False when the judging is full."""
        end = self.open(run)
        if end is None:
            return False
        self.start(end, work)
        return True

    async def settled(self, run: str, within: float | None = None) -> None:
        """Once every end of `run` counted so far has run, or after `within` seconds."""
        ends = self._by_run.get(run)
        if ends:
            await asyncio.wait(set(ends), timeout=within)  # the ends go on if this waiter is cancelled

    async def close(self, within: float) -> None:
        """At shutdown: wait up to `within` seconds for the ends still running, then cancel them."""
        ends = {end for ends in self._by_run.values() for end in ends}
        if not ends:
            return
        _, late = await asyncio.wait(ends, timeout=within)
        if late:
            log.error("judging: %d ends not finished at shutdown (their records and accounting are lost)", len(late))
            for end in late:
                task = self._running.get(end)
                if task is not None:
                    task.cancel()
                else:
                    end.cancel()

    @staticmethod
    async def _run(work: Callable[[], Awaitable[None]], end: asyncio.Future[None]) -> None:
        try:
            await work()
        except Exception:
            log.exception("judging a response failed")
        finally:
            if not end.done():
                end.set_result(None)

    def _done(self, run: str, end: asyncio.Future[None]) -> None:
        self._pending -= 1
        self._running.pop(end, None)
        ends = self._by_run.get(run)
        if ends is not None:
            ends.discard(end)
            if not ends:
                del self._by_run[run]
