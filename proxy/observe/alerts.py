"""Webhook alerts: every blocking trip is POSTed as JSON to each `alerts.webhooks` URL.

The guard reports a trip synchronously (`tripped`), which only puts it on a
bounded queue: the request path never waits on a webhook, and a dead webhook
cannot grow memory (when the queue is full, new alerts are dropped and
counted). A few worker tasks, started and stopped with the app (`lifetime`,
for `cleanup_ctx`), deliver with one `httpx.AsyncClient`: each attempt has
`alerts.timeout`, failures are retried `alerts.retries` times with exponential
backoff, except 4xx answers other than 408/429, which will not get better.
On shutdown queued alerts get one attempt window to go out, then the workers
are cancelled.

The payload is the trip's fields plus `text`, so a Slack-compatible incoming
webhook shows a readable message. Run ids, agent and tool names, models and
the reasons that quote them are chosen by clients and models, so `text` has
`&`, `<` and `>` escaped as Slack asks (`slack_escaped`): a run id of
`<!channel>` or `<https://evil.example|click>` shows as typed, never as a
ping or a disguised link. Webhook URLs often embed a secret, so only
their scheme and host are ever logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
from aiohttp import web

from runguard.config import AlertSettings
from runguard.proxy.core.safe_text import printable, reset_command
from runguard.proxy.core.tasks import hold
from runguard.proxy.guard import NullObserver, spend
from runguard.proxy.store.records import TripRecord

log = logging.getLogger("runguard.alerts")

RETRYABLE_4XX = frozenset({408, 429})


def slack_escaped(text: str) -> str:
    """`text` with the three characters Slack's message formatting reads (`&`, `<`, `>`) escaped; Slack shows
    them as typed."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def alert_text(trip: TripRecord, url: str | None = None) -> str:
    """A one-paragraph, human summary of a trip (Slack `text`); `url`: the proxy's, when not the default.

    The run id, model and reason come from clients: printable here, shell-quoted in the reset command, and
    the whole text escaped for Slack (no mention, link or channel ping can be smuggled in).
    """
    if trip.scope == "run":
        reset = reset_command(run_id=trip.run_id, url=url)
    elif trip.scope == "key_model":  # `reset --key` alone leaves the key+model breaker open
        reset = reset_command(key=trip.key_hash, model=trip.model, url=url)
    else:
        reset = reset_command(key=trip.key_hash, url=url)
    if trip.unpriced and not trip.usd_so_far:  # its model has no price: what it spent is unknown, not $0
        spent = "Spent: unpriced (no price for its model)"
    else:
        spent = f"Spent {spend(trip.usd_so_far, trip.unpriced)}, about ${trip.usd_avoided_estimate:.4f} avoided"
    return slack_escaped(
        f"RunGuard blocked run {printable(trip.run_id)} at request {trip.request_index}: {trip.detector} "
        f"({trip.scope} scope). {printable(trip.reason)}. {spent}. Reset with: {reset}"
    )


def alert_payload(trip: TripRecord, url: str | None = None) -> bytes:
    """The JSON body POSTed for `trip`: its fields plus `text`."""
    fields: dict[str, Any] = {f.name: getattr(trip, f.name) for f in dataclasses.fields(trip)}
    fields["evidence"] = dict(trip.evidence)
    fields["text"] = alert_text(trip, url)
    return orjson.dumps(fields, default=str)


def where(url: str) -> str:
    """Scheme and host only: incoming-webhook URLs carry their secret in the path."""
    parsed = urlsplit(url)
    return f"{parsed.scheme}://{parsed.hostname}"


class Alerts(NullObserver):
    """Delivers blocking trips to webhooks from background workers."""

    def __init__(
        self,
        settings: AlertSettings,
        *,
        outcome: Callable[[str], None] | None = None,
        queue_size: int = 1000,
        workers: int = 4,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
        proxy_url: str | None = None,
    ) -> None:
        self._settings = settings
        self._proxy_url = proxy_url  # named in the reset command when the proxy is not on the default address
        self._outcome = outcome or (lambda _: None)
        self._queue: asyncio.Queue[TripRecord] = asyncio.Queue(queue_size)
        self._workers = workers
        self._backoff = backoff
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._dropping = False

    def tripped(self, trip: TripRecord) -> None:
        if trip.action != "block" or self._client is None:
            return
        try:
            self._queue.put_nowait(trip)
            self._dropping = False
        except asyncio.QueueFull:
            self._outcome("dropped")
            if not self._dropping:  # once per episode, not once per trip
                log.warning("alert queue full (%d): dropping alerts until webhooks catch up", self._queue.maxsize)
                self._dropping = True

    async def lifetime(self, app: web.Application) -> AsyncIterator[None]:
        """For `app.cleanup_ctx`: the client and workers live exactly as long as the app."""
        self._client = httpx.AsyncClient(timeout=self._settings.timeout, transport=self._transport)
        for _ in range(self._workers):
            hold(self._tasks, self._work())
        try:
            yield
        finally:
            await self._close()

    async def _close(self) -> None:
        client, self._client = self._client, None  # trips from now on are not queued
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), timeout=self._settings.timeout)
        if self._queue.qsize():
            log.warning("shutting down with %d undelivered alerts", self._queue.qsize())
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if client is not None:
            await client.aclose()

    async def _work(self) -> None:
        while True:
            trip = await self._queue.get()
            try:
                await self.deliver(trip)
            except Exception:  # a bug here must not kill the worker
                log.exception("alert delivery failed")
            finally:
                self._queue.task_done()

    async def deliver(self, trip: TripRecord) -> None:
        """POST `trip` to every webhook at once; each retries on its own."""
        body = alert_payload(trip, self._proxy_url)
        await asyncio.gather(*(self._post(url, body) for url in self._settings.webhooks))

    async def _post(self, url: str, body: bytes) -> None:
        client = self._client
        problem = "client closed"
        attempts = 0
        while client is not None and attempts <= self._settings.retries:
            if attempts:
                await asyncio.sleep(self._backoff * 2 ** (attempts - 1))
            attempts += 1
            try:
                # A hard bound per attempt: httpx's timeout is per read, and a webhook may trickle bytes.
                async with asyncio.timeout(self._settings.timeout):
                    response = await client.post(url, content=body, headers={"Content-Type": "application/json"})
            except (httpx.HTTPError, httpx.InvalidURL, TimeoutError) as exc:
                problem = type(exc).__name__
                continue
            if response.is_success:
                self._outcome("delivered")
                return
            problem = f"HTTP {response.status_code}"
            if response.status_code < 500 and response.status_code not in RETRYABLE_4XX:
                break
        log.warning("alert webhook %s failed after %d attempt(s): %s", where(url), attempts, problem)
        self._outcome("failed")
