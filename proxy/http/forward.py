"""An admitted model request sent upstream, its answer read and relayed, all within its `Passage`.

A whole answer is read, judged (`Passage.replacement`: a detector may stop it
before the client sees it) and sent; a stream is relayed event by event, read
as it passes, its end accounted for whether it finishes, breaks upstream or
loses its client. What each end records (`client_status`, `error`, `body`) is
told to the passage as it becomes known; the passage runs the end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from runguard.proxy.core.errors import UpstreamError
from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.core.frozen import frozen
from runguard.proxy.guard import Passage, Ticket
from runguard.proxy.http.exchange import exchange
from runguard.proxy.http.recorded import recorded
from runguard.proxy.providers.answers import Synthetic
from runguard.proxy.providers.framing import SSE, Framing
from runguard.proxy.providers.routes import Route
from runguard.proxy.relay import (
    ProxyContext,
    UsageChunkFilter,
    decode_body,
    overhead,
    relay_stream,
    upstream_failed,
    whole_response,
)


@frozen
class Outgoing:
    """What goes upstream, how the client's copy of a stream is rewritten (opt-in only), and how the
    answer streams (`framing`: its units held whole, so an error can end it as one more)."""

    headers: CIMultiDict[str]
    body: bytes
    rewrite: UsageChunkFilter | None = None
    framing: Framing = SSE


def synthetic(answer: Synthetic, ticket: Ticket) -> web.Response:
    """A local answer (a stopped request, a replaced response), with RunGuard's headers."""
    headers = CIMultiDict(answer.headers)
    headers["x-runguard-run-id"] = ticket.run_id
    if ticket.blocked_by:
        headers["x-runguard-trip"] = ticket.blocked_by
    warning = ticket.warning_header()
    if warning:
        headers["x-runguard-warning"] = warning
    return web.Response(status=answer.status, headers=headers, body=answer.body)


def _extra_headers(ticket: Ticket) -> CIMultiDict[str]:
    extra = CIMultiDict({"x-runguard-run-id": ticket.run_id})
    warning = ticket.warning_header()
    if warning:
        extra["x-runguard-warning"] = warning
    return extra


async def forward(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    passage: Passage,
    sending: Outgoing,
    answered: Callable[[int], Awaitable[None]] | None = None,
) -> web.StreamResponse:
    """Send the admitted request upstream and relay its answer (a client that leaves meanwhile abandons
    the upstream call with it: the passage records it as `client_disconnected`). `answered` is told the
    upstream's status before the client sees a byte of the answer (an account's proof: `accounts`)."""
    keep = ctx.settings.store.record_bodies

    def failed(exc: UpstreamError) -> web.Response:
        reply = upstream_failed(route.dialect, exc)
        reply.headers["x-runguard-run-id"] = passage.ticket.run_id
        passage.seen(ResponseInfo(error=str(exc), complete=False), None)
        passage.client_status, passage.error = reply.status, type(exc).__name__
        passage.body = recorded(request, sending.body, b"", None) if keep else None
        return reply

    async def on_stream(upstream: aiohttp.ClientResponse, sent: float) -> web.StreamResponse:
        return await _forward_stream(request, ctx, passage, upstream, sending.body if keep else None, sending)

    async def on_whole(upstream: aiohttp.ClientResponse, raw: bytes, sent: float) -> web.StreamResponse:
        ticket = passage.ticket
        parsed = decode_body(raw, upstream.headers.get("Content-Encoding"), 1 << 30)
        info = ticket.adapter.parse_response(parsed) if parsed is not None else ResponseInfo(parse_error="encoding")
        passage.seen(info, upstream.status)
        replacement = passage.replacement()
        reply = (
            synthetic(replacement, ticket)
            if replacement is not None
            else whole_response(upstream, raw, _extra_headers(ticket))
        )
        passage.body = recorded(request, sending.body, raw, upstream.status) if keep else None
        overhead.stamp(request, reply.headers)
        await reply.prepare(request)
        await reply.write_eof()
        passage.client_status = reply.status  # a client that left before it had the answer is recorded with none
        return reply

    passage.forwarding()
    return await exchange(
        request,
        ctx,
        route,
        sending.headers,
        sending.body,
        failed=failed,
        on_stream=on_stream,
        on_whole=on_whole,
        answered=answered,
    )


async def _forward_stream(
    request: web.Request,
    ctx: ProxyContext,
    passage: Passage,
    upstream: aiohttp.ClientResponse,
    recorded_request: bytes | None,
    sending: Outgoing,
) -> web.StreamResponse:
    ticket = passage.ticket
    parser = ticket.adapter.stream_parser()
    status = upstream.status
    # Should the client leave: closing the upstream response (by leaving `async with`) cancels the upstream
    # request, and the passage records the partial usage the parser has seen so far.
    passage.reading(parser, status)
    passage.client_status = status
    if recorded_request:
        passage.body = recorded(request, recorded_request, b"", status)
    with ctx.shutdown.streaming(upstream.content):
        out, outcome = await relay_stream(
            request,
            upstream,
            parser,
            overhead.stamp(request, _extra_headers(ticket)),
            ticket.adapter.stream_error_event,  # the framed adapter's (`Framing.framed`)
            capture=recorded_request is not None,
            rewrite=sending.rewrite,
            framing=sending.framing,
            before_end=passage.ending,  # its end marked pending before the client has its last event
        )
    info = parser.close()
    if outcome.error is not None and outcome.error != "proxy_shutdown" and info.error is None:
        # A reset or silence mid-stream is an upstream failure (retry_cascade counts it).
        info = dataclasses.replace(info, error=outcome.error, complete=False)
    passage.seen(info, status)
    passage.error = outcome.error
    if recorded_request:
        captured = bytes(outcome.captured) if outcome.captured is not None else b""
        passage.body = recorded(request, recorded_request, captured, status)
    return out
