"""Putting the state back from the records at start: the day's spend, live runs, open breakers.

The records are the truth (`store.live`); the state is rebuilt from them (`guard.records.rebuild`) before
the proxy serves: this runs on the app's start-up, and the port opens only once it is done, so no
request is served with a state that forgot a stop or a spend. A store that does not answer yet is
waited for (its schema first, then the read), and said so in the log every time it is retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from runguard.config import Settings
from runguard.proxy.guard import Policy, Rebuilt, rebuild
from runguard.proxy.runs import Tenants
from runguard.proxy.state import StateBackend
from runguard.proxy.store.live_facts import Live, RecordsUnavailable

log = logging.getLogger("runguard.restore")

FIRST_RETRY = 0.25
FLUSH_SECONDS = 30.0  # the writer's backoff is 15 s at most: a store that came back has its backlog by then
MAX_RETRY = 5.0

ReadLive = Callable[[float], Awaitable[Live]]


class Restore:
    """Rebuilds `state` from the records `read` returns (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        state: StateBackend,
        policy: Policy,
        read: ReadLive,
        ready: Callable[[], Awaitable[object]],
        clock: Callable[[], float] = time.time,
        *,
        fresh: bool = False,
        flush: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`fresh`: `state` is new and empty (in-memory state made for this app): the rebuild writes without
        reading first. `flush`: lands this process's record backlog (the store's writer), before each read."""
        self._flush = flush
        self._settings = settings
        self._fresh = fresh
        self.state = state
        self._read = read
        self._ready = ready  # the store's schema is there
        self.clock = clock
        self._tenants = Tenants(settings.runs.tenants)
        stays = {detector.name: detector.stays_stopped for detector in policy.detectors}
        self._latches = lambda name: stays.get(name, True)  # an unknown detector: kept stopped (fail safe)
        self.last: Rebuilt | None = None
        self.seconds = 0.0

    async def _live(self) -> Live:
        delay = FIRST_RETRY
        while True:
            try:
                await self._ready()
                await self._landed()
                return await self._read(self.clock())
            except RecordsUnavailable as exc:  # the records are needed before serving: wait for them
                log.warning("state rebuild: the record store does not answer (%r); retrying in %.2f s", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY)

    async def _landed(self) -> None:
        """Let the record writer land what it holds first: requests served while the store was down count once
        their records are in (the figures are raised to the records', so never twice)."""
        if self._flush is None:
            return
        try:
            await asyncio.wait_for(self._flush(), FLUSH_SECONDS)
        except TimeoutError:
            log.warning(
                "state rebuild: the record writer still holds records after %.0f s; reading without them", FLUSH_SECONDS
            )

    async def run(self) -> Rebuilt:
        """Read what is live in the records and write it into the state."""
        began = time.perf_counter()
        live = await self._live()
        breakers = self._settings.guard.breaker
        self.last = await rebuild(
            self.state,
            live,
            tenants=self._tenants,
            latches=self._latches,
            breakers=breakers,
            now=self.clock(),
            fresh=self._fresh,
        )
        self.seconds = time.perf_counter() - began
        if self.last.no_room:
            log.warning(
                "state rebuild: %d runs found no room (runs.max_runs_per_tenant: all of a tenant's runs are "
                "stopped); their requests are refused until reset, as the tenant's new runs are",
                self.last.no_room,
            )
        log.info(
            "state rebuilt from the records in %.2f s: %d keys' spend today, %d live runs, %d open breakers",
            self.seconds,
            self.last.keys,
            self.last.runs,
            self.last.breakers,
        )
        return self.last

    async def at_start(self, _app: web.Application) -> None:
        """For `app.on_startup`: the port opens after it (see the module docstring)."""
        await self.run()
