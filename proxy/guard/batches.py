"""The guard's state batches: run, failed soft, and taken back when they ran for nobody.

A batch that fails (`StateUnavailable`) returns None and marks the guard
degraded until a batch answers again (the health check and a metric read
`degraded_since`). A batch that takes something (a request's in-flight slot)
may be given `undo` ops: they run if the batch turns out to have run after
all while its caller went on without it (its reply was lost, or the client
left while it ran), so nothing is held until its run expires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from runguard.proxy.core.errors import StateFull, StateUnavailable
from runguard.proxy.core.ops import Op, OpResult
from runguard.proxy.core.tasks import hold
from runguard.proxy.state import ScopeIds, StateBackend

log = logging.getLogger("runguard.guard")
T = TypeVar("T")


async def _ran(batch: Awaitable[list[OpResult]]) -> Sequence[OpResult] | None:
    """The results of a batch that may fail or lose its reply: None if it did not run (or cannot tell)."""
    try:
        return await batch
    except StateUnavailable as exc:
        return await exc.pending if exc.pending is not None else None


class Batches:
    """Runs the guard's batches on its state backend (see the module docstring)."""

    def __init__(
        self, state: StateBackend, *, fail_closed: bool, clock: Callable[[], float], on_error: Callable[[], None]
    ) -> None:
        self._state = state
        self._fail_closed = fail_closed
        self._clock = clock
        self._on_error = on_error
        self.degraded_since: float | None = None
        self._undoing: set[asyncio.Task[None]] = set()  # undos waiting for a lost batch to settle

    @property
    def never_waits(self) -> bool:
        """The backend answers without handing the loop over (the in-memory one)."""
        return self._state.never_waits

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` (an undo, or what a request left for nobody) in the background; `settle` waits for it."""
        hold(self._undoing, work)

    async def settle(self, within: float) -> None:
        """At shutdown: wait (up to `within` seconds) for the undos of abandoned requests, so the
        in-flight slots they give back are not left taken in a shared state backend."""
        if self._undoing:
            await asyncio.wait(set(self._undoing), timeout=within)

    async def execute(
        self, ids: ScopeIds, ops: Sequence[Op], undo: Sequence[Op] = (), *, refusable: bool = False
    ) -> list[OpResult] | None:
        """The batch's results, or None when the backend failed. `refusable` (a new request's admission):
        `StateFull` is raised, for the request to be refused; elsewhere it is a failure like any other.

        `undo`: ops that take back what the batch did, run if it failed here but
        turns out to have run all the same (its reply was lost), or if the caller
        is cancelled (its client left) while the batch runs: the caller goes on
        without its results, so what it holds (an in-flight slot) would otherwise
        be held until the run expires.
        """
        try:
            if undo and not self._state.never_waits:
                batch = self._state.execute(ids, ops)
                results = await self.to_the_end(batch, lambda ran: self._undo_when_run(ids, _ran(ran), undo))
            else:
                results = await self._state.execute(ids, ops)
        except StateFull:
            if refusable:
                raise  # nothing of the batch ran, and the backend is fine
            self._on_error()
            return None
        except StateUnavailable as exc:
            if self.degraded_since is None:
                log.warning("state backend unavailable, failing %s: %s", "closed" if self._fail_closed else "open", exc)
                self.degraded_since = self._clock()
            self._on_error()
            if undo and exc.pending is not None:
                self._undo_when_run(ids, exc.pending, undo)
            return None
        if self.degraded_since is not None:
            log.warning("state backend answers again")
            self.degraded_since = None
        return results

    async def to_the_end(self, work: Awaitable[T], if_left: Callable[[asyncio.Future[T]], object]) -> T:
        """`work`'s result. If the caller is cancelled meanwhile (its client left), `work` still runs to
        its end, and `if_left` is handed it to give back what it took for nobody."""
        running = asyncio.ensure_future(work)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            if_left(running)
            raise

    def _undo_when_run(self, ids: ScopeIds, pending: Awaitable[Sequence[OpResult] | None], undo: Sequence[Op]) -> None:
        async def undo_when_run() -> None:
            if await pending is not None:
                await self.execute(ids, undo)

        self.later(undo_when_run())
