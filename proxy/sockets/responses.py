"""The Responses API over a WebSocket: each `response.create` message is a request of its run.

Each `response.create` is admitted, in a `Passage`, as a streamed Responses
request with the handshake's `X-Run-Id`, agent and limit headers. A stopped
one is answered on the socket and never sent upstream. The events of an
admitted one are read on their way to the client, and its terminal event ends
its passage as the end of a stream does. Other client messages
(`response.steer`, ...) pass untouched; a message that cannot be read passes
too (fail open). What the messages say is read by the API's spec (`ProviderApi.socket`).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import TYPE_CHECKING

from runguard.proxy.core.events import Provider, RequestInfo, ResponseInfo
from runguard.proxy.guard import Passage, Tightening, unreadable
from runguard.proxy.providers.answers import Synthetic
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.sockets import EventParser, RequestMessages
from runguard.proxy.providers.spec import ProviderApi
from runguard.proxy.relay import error_body

if TYPE_CHECKING:
    from runguard.proxy.relay import ProxyContext

# Why a socket ended, as its cut-off requests are recorded (`error`).
SHUTDOWN = "proxy_shutdown"  # the proxy stops (as a stream it cuts over HTTP is recorded)
UPSTREAM_CLOSED = "upstream_closed"  # the provider closed the socket mid-answer: an upstream failure


@dataclasses.dataclass
class _InFlight:
    passage: Passage
    parser: EventParser


class ResponsesSocket:
    """The requests of one client's Responses WebSocket, lane by lane."""

    def __init__(
        self,
        ctx: ProxyContext,
        key_hash: str,
        spec: ProviderApi,
        socket: RequestMessages,
        *,
        header_run: str | None,
        agent: str | None,
        tight: Tightening,
        session: str | None = None,
        client: str = "other",
        upstream: Provider | None = None,
    ) -> None:
        """`spec`: the API the socket's requests are (`socket`: its `ProviderApi.socket`); `client`: the family
        of the client that opened it (`clients.family_of` of the handshake's headers); `upstream`: where the
        socket goes, when not the spec's provider (a compatible service: its prices, its name in records)."""
        self._ctx = ctx
        self._key_hash = key_hash
        self._header_run = header_run
        self._agent = agent
        self._tight = tight
        self._session = session  # the session the handshake named (`sessions.from_headers`)
        self._client = client
        self._upstream = upstream
        self._adapter = spec.adapter()
        self._socket = socket
        self._api = str(spec.name)
        self._lanes: dict[str | None, deque[_InFlight]] = {}

    async def from_client(self, text: str) -> list[str] | None:
        """None to send `text` upstream; else the messages that answer it here (nothing goes upstream)."""
        socket = self._socket
        create = socket.create(text)
        if create is None:
            if socket.unreadable_create(text):
                return await self._unreadable(text.encode(), "the message is no JSON object", None)
            return None
        ctx, body = self._ctx, text.encode()
        slot = ctx.slot(self._key_hash, self._header_run, body)
        info = self._adapter.parse_request(
            body, RequestContext(None, self._agent, True, history=slot, session=self._session, client=self._client)
        )
        if info.parse_error:
            return await self._unreadable(body, info.parse_error, create.lane)
        if not info.stream:  # a socket always streams; the SDK leaves `stream` out
            info = dataclasses.replace(info, stream=True)
        passage = await self._entered(info, body)
        return await self._answered(passage, passage.answer, create.lane)

    async def _entered(self, info: RequestInfo, body: bytes) -> Passage:
        """The request's passage, admitted as a request of the handshake's run, key, limits and upstream."""
        passage = self._ctx.guard.passage(
            self._adapter,
            info,
            body=body,
            key_hash=self._key_hash,
            header_run=self._header_run,
            tight=self._tight,
            upstream=self._upstream,
        )
        await passage.enter()
        return passage

    async def _answered(self, passage: Passage, answer: Synthetic | None, lane: str | None) -> list[str] | None:
        """`answer` on the request's lane (its passage ended); without one, the request goes upstream and waits
        on its lane for its terminal event."""
        if answer is not None:
            await passage.finish()
            return self._socket.messages_of(answer, lane)
        self._lanes.setdefault(lane, deque()).append(_InFlight(passage, self._socket.parser()))
        return None

    async def _unreadable(self, body: bytes, problem: str, lane: str | None) -> list[str] | None:
        """A request the proxy cannot read, as over HTTP (`guard.unreadable`): judged by what needs no content
        (caps, budgets, breakers: a stopped run stays stopped), recorded with its parse error, then sent
        upstream (`forward`) or refused with a 400 (`refuse`). One sent upstream is ended by its lane's
        terminal event; a message that cannot be read at all names no lane, so it waits on the default one."""
        ctx = self._ctx
        ctx.observer.parse_error(self._api)
        info = unreadable.request_info(self._adapter.api, problem, body, model=None, stream=True)
        passage = await self._entered(info, body)
        action = ctx.settings.guard.unreadable
        ctx.observer.unreadable(str(passage.ticket.provider), "blocked" if passage.answer is not None else action)
        answer = passage.answer
        if answer is None and action == "refuse":
            message = f"RunGuard cannot read this request ({problem}) and does not forward what it cannot read"
            answer = Synthetic(400, {}, error_body(self._adapter.provider, 400, message[:1000], "unreadable_request"))
            passage.client_status = answer.status
        return await self._answered(passage, answer, lane)

    async def before_client(self, text: str) -> str | None:
        """Events are read once the client has them (`after_client`): nothing is held back."""
        return None

    async def after_client(self, text: str) -> None:
        """Read an event the client has been sent; a lane's terminal event ends its request's passage."""
        if not self._lanes:
            return
        event = self._socket.read(text)
        if event is None:
            return
        waiting = self._lanes.get(event.lane)
        if not waiting:
            return
        head = waiting[0]
        head.parser.take(event.payload)
        status = event.ending
        if status is None:
            return
        waiting.popleft()
        if not waiting:
            del self._lanes[event.lane]
        await self._finish(head, status, None)

    async def close(self, reason: str) -> None:
        """The socket closed: end the requests still waiting on their answer, as cut off, with `reason`. Only a
        provider that closed mid-answer (`UPSTREAM_CLOSED`) failed them, as a stream that breaks upstream does
        over HTTP (`retry_cascade` counts it); a client that left (`CLIENT_LEFT`) or a proxy that stops
        (`SHUTDOWN`) is no failure of the provider's."""
        lanes, self._lanes = self._lanes, {}
        failed = reason == UPSTREAM_CLOSED
        for waiting in lanes.values():
            for cut in waiting:
                info = dataclasses.replace(cut.parser.close(), complete=False)
                if failed:
                    info = dataclasses.replace(info, error=info.error or reason)
                await self._end(cut.passage, info, None if failed else 200, None, reason)

    async def _finish(self, done: _InFlight, status: int, error: str | None) -> None:
        await self._end(done.passage, done.parser.close(), status, status, error)

    async def _end(
        self, passage: Passage, info: ResponseInfo, status: int | None, client_status: int | None, error: str | None
    ) -> None:
        passage.seen(info, status)
        passage.client_status, passage.error = client_status, error
        await passage.finish()
