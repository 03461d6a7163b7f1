"""WebSocket connections: relayed message by message between the client and the provider.

The SDKs open WebSockets on the base URL they are given, so a proxy that
answered the handshake with anything but a relay would break them: the Realtime
API (`client.realtime.connect()`, voice agents), Gemini's Live API
(`/ws/...BidiGenerateContent`), and the Responses API over a WebSocket
(`client.responses.connect()`, openai-agents' websocket transport). The
handshake goes upstream first, with the client's headers as for any request
(less RunGuard's own and the handshake's, which aiohttp writes afresh), so a
refusal reaches the client with the provider's status. Then every message is
relayed as it comes, text as text and binary as binary, and either side's
close closes the other with its code.

Responses API sockets are guarded (`ws_responses`): each `response.create`
message is a request of its run, admitted, stopped or answered as over HTTP.
Realtime sessions are guarded too (`ws_realtime`): each response the server
announces is admitted before the client hears of it and accounted when done;
a stopped session is told why and closed. Other sockets (Gemini's Live API)
are relayed and not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Protocol

import aiohttp
from aiohttp import WSCloseCode, WSMsgType, web
from multidict import CIMultiDict

from runguard.proxy.core.errors import UpstreamError, UpstreamRefused
from runguard.proxy.guard import tightening_from
from runguard.proxy.guard.passage import CLIENT_LEFT
from runguard.proxy.providers import registry
from runguard.proxy.providers.common import clients
from runguard.proxy.providers.common import sessions as client_sessions
from runguard.proxy.providers.routes import Route, raw_target
from runguard.proxy.relay import provider_error, upstream_failed
from runguard.proxy.sockets.realtime import RealtimeSocket
from runguard.proxy.sockets.responses import SHUTDOWN, UPSTREAM_CLOSED, ResponsesSocket

if TYPE_CHECKING:
    from runguard.proxy.relay import ProxyContext

log = logging.getLogger("runguard.proxy")

# The handshake's own headers: each hop writes its own (aiohttp's client and server do).
_HANDSHAKE = ("sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol")
CLOSE_SENT_WAIT = 0.1  # seconds a stopping server gives a close frame to leave before it drops the connection
_CLOSED = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)


def offered_protocols(request: web.Request) -> tuple[str, ...]:
    """The subprotocols a handshake offers (a browser's Realtime key among them: see `credentials`)."""
    offered = request.headers.getall("Sec-WebSocket-Protocol", ())
    return tuple(name.strip() for value in offered for name in value.split(",") if name.strip())


async def relay(
    request: web.Request, ctx: ProxyContext, route: Route, key_hash: str, headers: CIMultiDict[str]
) -> web.StreamResponse:
    """Open the upstream socket, then the client's, and relay between them until either closes (`headers`:
    what goes upstream, as `handlers.handle` computed it, the key `key_hash` names read from it)."""
    refused = ctx.guard.policy.header_errors(tightening_from(request.headers))
    if refused:  # as for HTTP requests: a per-run header the proxy cannot use is named, not ignored
        message = f"RunGuard: invalid X-RunGuard-* header: {'; '.join(refused)}"
        return provider_error(route.dialect, 400, message[:1000], "invalid_runguard_header")
    for name in _HANDSHAKE:
        headers.popall(name, None)
    target = raw_target(route, request.raw_path)
    try:
        upstream = await ctx.upstreams[route.provider].connect(target, headers, offered_protocols(request))
    except UpstreamRefused as exc:
        return provider_error(route.dialect, exc.status, f"RunGuard: the provider refused: {exc}", "websocket_refused")
    except UpstreamError as exc:
        return upstream_failed(route.dialect, exc)
    async with upstream:
        client = web.WebSocketResponse(
            protocols=(upstream.protocol,) if upstream.protocol else (),
            max_msg_size=ctx.settings.server.max_body_bytes,
        )
        await client.prepare(request)
        guarded = _guard(request, ctx, route, key_hash)
        cause = CLIENT_LEFT  # a handler cancelled mid-relay: its client went away
        try:
            cause = await _both_ways(client, upstream, guarded, ctx.stopping)
        finally:
            if guarded is not None:
                ctx.spawn(guarded.close(cause))  # what was in flight when the socket ended, and why
        if ctx.stopping.is_set():  # the client reconnects, to another replica or after the restart
            await _going_away(client)
        await upstream.close(code=_sendable(client.close_code))
        await client.close(code=_sendable(upstream.close_code))
    return client


async def _going_away(client: web.WebSocketResponse) -> None:
    """Close the client's socket as the server stops. A stopping aiohttp server reads nothing more from its
    connections, so the client's answer to the close would never arrive: it is not waited for."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CLOSE_SENT_WAIT):
            await client.close(code=WSCloseCode.GOING_AWAY, message=b"RunGuard is shutting down")


def _sendable(code: int | None) -> int:
    """A close code to pass on: one a peer may send (RFC 6455 7.4.1 keeps 1005, 1006 and 1015 for reports)."""
    return code if code is not None and code not in (1005, 1006, 1015) else WSCloseCode.OK


class SocketGuard(Protocol):
    """What reads a guarded socket's messages on their way (`ws_responses`, `ws_realtime`)."""

    async def from_client(self, text: str) -> list[str] | None:
        """None to send `text` upstream; else the messages that answer it here (nothing goes upstream)."""
        ...

    async def before_client(self, text: str) -> str | None:
        """A server message before the client gets it: None to pass it on, else the message to send the
        client instead, after which the socket is closed."""
        ...

    async def after_client(self, text: str) -> None:
        """A server message the client has been sent."""
        ...

    async def close(self, reason: str) -> None:
        """The socket closed: account for what was still under way."""
        ...


def guarded(route: Route) -> bool:
    """Whether a socket on `route` is read request by request (`_guard`); else it is relayed unread (Gemini's
    Live API), and only a key's own stops can keep it from being opened (`spending`)."""
    sessions = registry.REGISTRY.sessions_at(route.provider, route.upstream_path)
    return sessions is not None or (route.spec is not None and route.spec.socket is not None)


def _guard(request: web.Request, ctx: ProxyContext, route: Route, key_hash: str) -> SocketGuard | None:
    """The guard of an API's WebSocket mode (its spec's `socket`: Responses'), or of a provider's sessions
    (`registry.SESSIONS`: OpenAI's Realtime, `/v1/realtime?model=...`); None for a socket relayed unread."""
    if not guarded(route):
        return None
    sessions = registry.REGISTRY.sessions_at(route.provider, route.upstream_path)
    spec = route.spec
    header_run, agent = ctx.names(request.headers)
    tight = tightening_from(request.headers)
    if sessions is not None:
        model = sessions.model(request.query)
        return RealtimeSocket(ctx, key_hash, sessions, model=model, header_run=header_run, agent=agent, tight=tight)
    if spec is None or spec.socket is None:
        return None  # (ruled out above)
    session = client_sessions.from_headers(request.headers) if header_run is None else None  # codex names it
    return ResponsesSocket(
        ctx,
        key_hash,
        spec,
        spec.socket,
        header_run=header_run,
        agent=agent,
        tight=tight,
        session=session,
        client=clients.family_of(request.headers),  # the handshake's sender: a block answers it as over HTTP
        upstream=route.provider,  # a compatible service's socket is its own, priced by its table
    )


async def _both_ways(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    guarded: SocketGuard | None,
    stopping: asyncio.Event,
) -> str:
    """Relay in both directions until one side closes, the server begins to stop, or the handler is cancelled;
    why it ended: the client left (`CLIENT_LEFT`), the server is stopping (`SHUTDOWN`), or the provider closed
    (`UPSTREAM_CLOSED`, also when a stopped run's socket is closed after its answer)."""
    outward = asyncio.ensure_future(_from_client(client, upstream, guarded))
    inward = asyncio.ensure_future(_from_upstream(upstream, client, guarded))
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait((outward, inward, stop), return_when=asyncio.FIRST_COMPLETED)
        cause = SHUTDOWN if stop.done() else CLIENT_LEFT if outward.done() else UPSTREAM_CLOSED
    finally:
        for task in (outward, inward, stop):
            task.cancel()
        await asyncio.gather(outward, inward, stop, return_exceptions=True)
    for pump in (outward, inward):
        failure = None if pump.cancelled() else pump.exception()
        if isinstance(failure, ConnectionError | aiohttp.ClientError):  # a side went away mid-message
            log.debug("websocket relay ended: %s", type(failure).__name__)
        elif failure is not None:
            log.error("websocket relay failed", exc_info=failure)
    return cause


async def _from_client(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    guarded: SocketGuard | None,
) -> None:
    async for message in client:
        if message.type is WSMsgType.TEXT:
            text: str = message.data
            answers = await guarded.from_client(text) if guarded is not None else None
            if answers is None:
                await upstream.send_str(text)
            else:  # answered here: nothing goes upstream
                for answer in answers:
                    await client.send_str(answer)
        elif message.type is WSMsgType.BINARY:
            await upstream.send_bytes(message.data)
        elif message.type in _CLOSED:
            return


async def _from_upstream(
    upstream: aiohttp.ClientWebSocketResponse,
    client: web.WebSocketResponse,
    guarded: SocketGuard | None,
) -> None:
    async for message in upstream:
        if message.type is WSMsgType.TEXT:
            stopped = await guarded.before_client(message.data) if guarded is not None else None
            if stopped is not None:  # the run is stopped: say why, then close the socket
                await client.send_str(stopped)
                await client.close(code=WSCloseCode.POLICY_VIOLATION, message=b"RunGuard stopped this run")
                return
            await client.send_str(message.data)
            if guarded is not None:
                await guarded.after_client(message.data)
        elif message.type is WSMsgType.BINARY:
            await client.send_bytes(message.data)
        elif message.type in _CLOSED:
            return
