"""What every provider request handler shares: the context `create_app` builds once."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import field
from typing import Any

from aiohttp import web
from multidict import CIMultiDictProxy

from runguard.config import Settings
from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.tasks import hold
from runguard.proxy.guard import SHORT_HEADERS, Guard, Observer
from runguard.proxy.providers.common.history import HistoryCache, HistorySlot
from runguard.proxy.relay.headers import header_text
from runguard.proxy.relay.shutdown import Shutdown
from runguard.proxy.relay.upstream import Upstreams
from runguard.proxy.runs import Accounts, KeyHasher


@frozen
class ProxyContext:
    """Everything a provider request needs, built once by `create_app`."""

    settings: Settings
    guard: Guard
    upstreams: Upstreams
    hasher: KeyHasher
    observer: Observer
    background: set[asyncio.Task[None]]
    reading: set[asyncio.Task[Any]] = field(default_factory=set)  # handlers still receiving a request body
    shutdown: Shutdown = field(default_factory=lambda: Shutdown(30.0))  # the graceful stop's clock
    history: HistoryCache | None = None  # checkpoints of long conversations (None: every request read whole)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # set when the server begins to stop
    # The state backend never awaits (the in-memory one): a request's bookkeeping cannot be cancelled
    # half-way, so `settle` runs it in place instead of in a task of its own (~9 us a request).
    state_never_waits: bool = False
    # Which account (a Vertex AI project) a rotating credential is proven to act for (None: every credential
    # acts as itself).
    accounts: Accounts | None = None

    def names(self, headers: CIMultiDictProxy[str]) -> tuple[str | None, str | None]:
        """The run and the agent a request's headers name (`X-Run-Id`, `X-Agent-Name`), as text."""
        runs = self.settings.runs
        return header_text(headers.get(runs.run_header)), header_text(headers.get(runs.agent_header))

    def slot(self, key_hash: str, header_run: str | None, body: bytes) -> HistorySlot | None:
        """Where a request's conversation keeps its checkpoints: None if it is too short to need one."""
        history = self.history
        if history is None or len(body) < history.min_body:
            return None
        return HistorySlot(history, key_hash, header_run or "")

    @property
    def own_headers(self) -> tuple[str, ...]:
        """RunGuard's request headers, never sent upstream (besides every `X-RunGuard-*`)."""
        return (self.settings.runs.run_header, self.settings.runs.agent_header, *SHORT_HEADERS)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Finish work after the client left (a disconnect must not lose the record)."""
        hold(self.background, coro)

    async def settle(self, coro: Coroutine[Any, Any, None]) -> None:
        """Await the work that accounts for a request (usage, detectors, its record) to its end.

        The server cancels a handler when its client disconnects, and a client
        may close its connection the moment it has its answer, while this work
        still waits for the state backend: the cancellation ends the handler,
        not the work.
        """
        if self.state_never_waits:
            await coro
            return
        await asyncio.shield(hold(self.background, coro))

    def stop_reading(self) -> None:
        """At shutdown: end the handlers still waiting for a request body.

        Once the server begins to stop, aiohttp drops the bytes that arrive on
        its connections, so such a body never completes and its handler would
        hold the shutdown for the whole grace period. Nothing of these requests
        went upstream; their clients see the connection close, as for any
        request that reaches a stopping server.
        """
        self.stopping.set()
        for task in list(self.reading):
            task.cancel()


CONTEXT: web.AppKey[ProxyContext] = web.AppKey("runguard_context", ProxyContext)
