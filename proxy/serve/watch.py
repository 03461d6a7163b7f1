"""Keeping a shared state (Redis) whole: a rebuild from the records when it lost what it held.

At start, and every `state.generation_seconds` after, one look at the state's generation
(`state.generation`) tells whether Redis still holds what the proxies gave it. When it does not
(it restarted empty, failed over to a replica that missed the last writes, or another server
answers the endpoint), one process rebuilds it from the records (`Restore`, merging: figures are
raised, never lowered, and breakers written only where none is); the others wait for its new mark.

At start a process serves only once the state is known whole: it rebuilds it, or waits for the
process that is rebuilding it, so a replica or worker that joins late sees the same stops and
spend as the others from its first request. A Redis that does not answer at start is not waited
for: requests fail open as they do during any outage (`state.fail_closed`), and the watch looks
again once it answers.

Before reading the records, the rebuild lets this process's record writer land what it holds
(`Restore`): a request served during an outage of the store counts once its record is written, and
only once, since figures are raised to the records' and not added to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from aiohttp import web

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.serve.restore import Restore
from runguard.proxy.state import Generation, Look, StateBackend

log = logging.getLogger("runguard.restore")

BUSY_POLL = 0.1


class Watch:
    """Looks at the shared state's generation and rebuilds it when it was lost (see the module docstring)."""

    def __init__(
        self,
        restore: Restore,
        state: StateBackend,
        interval: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._restore = restore
        self._generation = Generation(state, clock)
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self.rebuilding = False
        self.rebuilds = 0  # rebuilds this process made

    async def check(self) -> Look:
        """One look; a lost state is rebuilt by this process if it wins the claim."""
        look = await self._generation.look()
        if look is not Look.LOST:
            return look
        if await self._generation.take() is None:
            return Look.BUSY  # another process claimed it first
        log.warning("state: Redis lost what it held (emptied, failed over or another server): rebuilding")
        self.rebuilding = True
        try:
            await self._restore.run()
            await self._generation.done()
            self.rebuilds += 1
        finally:
            self.rebuilding = False
        return Look.LOST

    async def _settled(self) -> None:
        """At start: until the state is whole (rebuilt here, or by another process)."""
        while True:
            try:
                if await self.check() is not Look.BUSY:
                    return
            except StateUnavailable as exc:
                log.warning("state: Redis does not answer at start (%s); serving, and looking again later", exc)
                return
            await asyncio.sleep(BUSY_POLL)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.check()
            except StateUnavailable:
                continue  # an outage: counted and logged by the guard; looked at again once it answers

    async def at_start(self, _app: web.Application) -> None:
        """For `app.on_startup`: the port opens once the state is whole; then the watch goes on."""
        await self._settled()
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="runguard-state-watch")

    async def stop(self, _app: web.Application) -> None:
        """For `app.on_shutdown`: before the state backend closes."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
