"""Requests RunGuard does not judge: forwarded as the client sent them, and only counted.

Requests the adapters do not model (GETs, embeddings, files, countTokens)
are forwarded untouched, their bodies streamed on as they arrive, whatever
their size. Of them, a Responses API poll (`GET /v1/responses/{id}`) is also
read once it is relayed, so a background response's cost is counted when it
is found finished (`background`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from runguard.proxy.core.errors import UpstreamError
from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.http.exchange import exchange
from runguard.proxy.http.recorded import masked
from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.registry import poller
from runguard.proxy.providers.routes import Route
from runguard.proxy.providers.spec import ProviderApi
from runguard.proxy.relay import (
    BodyTooLarge,
    ProxyContext,
    decode_body,
    overhead,
    relay_stream,
    upstream_failed,
    whole_response,
)


def polled(request: web.Request, route: Route) -> ProviderApi | None:
    """The API whose background response a GET polls (`GET /v1/responses/{id}`: Responses), read once relayed
    (`poll`); None for any other request."""
    if request.method != "GET":
        return None
    spec = poller(route.provider)
    if spec is None or spec.polls is None or spec.polls.polled_id(route.upstream_path) is None:
        return None
    return spec


def _declared_length(request: web.Request, body: bytes | aiohttp.StreamReader, headers: CIMultiDict[str]) -> None:
    """A body still arriving (`StreamReader`) streams on with the length the client declared."""
    if not isinstance(body, bytes) and request.content_length is not None:
        headers["Content-Length"] = str(request.content_length)


async def passthrough(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    body: bytes | aiohttp.StreamReader,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    """Forward the request untouched, with the `headers` `handle` computed (hop-by-hop, RunGuard's own and
    unread credentials out), and relay its answer as it comes."""
    _declared_length(request, body, headers)

    def failed(exc: UpstreamError) -> web.StreamResponse:
        return upstream_failed(route.dialect, exc)

    async def on_stream(upstream: aiohttp.ClientResponse, sent: float) -> web.StreamResponse:
        out, _ = await relay_stream(request, upstream, None, CIMultiDict(), None)
        return out

    async def on_whole(upstream: aiohttp.ClientResponse, raw: bytes, sent: float) -> web.StreamResponse:
        return whole_response(upstream, raw, CIMultiDict())

    return await exchange(request, ctx, route, headers, body, failed=failed, on_stream=on_stream, on_whole=on_whole)


async def poll(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    spec: ProviderApi,
    body: bytes,
    headers: CIMultiDict[str],
    key_hash: str,
) -> web.StreamResponse:
    """A poll of `spec`'s background response (`GET /v1/responses/{id}`), whole or a resumed stream:
    forwarded as `passthrough` does, then read.

    What the client gets is what `passthrough` gives it, byte for byte; the
    answer is read once it is sent (a stream: as it passes, as any stream),
    and one that finishes a background response is accounted for. A poll is
    no request of its run (it was counted when it was made), so it has no
    `Passage`: only its accounting, finished in the background if its client
    leaves (the response is finished upstream whether or not the client has it).
    """
    began = time.perf_counter()
    background = ctx.guard.background
    responses = spec.adapter()
    final = spec.polls.final if spec.polls is not None else frozenset()

    def failed(exc: UpstreamError) -> web.StreamResponse:
        return upstream_failed(route.dialect, exc)

    async def on_stream(upstream: aiohttp.ClientResponse, sent: float) -> web.StreamResponse:
        parser, status = responses.stream_parser(), upstream.status

        def account() -> Coroutine[Any, Any, None]:
            info = masked(parser.close(), request)
            latency = time.perf_counter() - sent
            return background.polled(
                info, key_hash=key_hash, streamed=True, status=status, latency=latency, began=began, final=final
            )

        try:
            out, _ = await relay_stream(request, upstream, parser, CIMultiDict(), None)
        except (asyncio.CancelledError, ConnectionResetError):
            ctx.spawn(account())  # the client left: what passed may have finished the response
            raise
        await ctx.settle(account())
        return out

    async def on_whole(upstream: aiohttp.ClientResponse, raw: bytes, sent: float) -> web.StreamResponse:
        status, latency = upstream.status, time.perf_counter() - sent
        encoding = upstream.headers.get("Content-Encoding")

        async def account_whole() -> None:
            info = _poll_answer(responses, raw, encoding) if status == 200 else None
            if info is not None:
                await background.polled(
                    masked(info, request),
                    key_hash=key_hash,
                    streamed=False,
                    status=status,
                    latency=latency,
                    began=began,
                    final=final,
                )

        reply = whole_response(upstream, raw, CIMultiDict())
        overhead.stamp(request, reply.headers)
        try:
            await reply.prepare(request)
            await reply.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            ctx.spawn(account_whole())  # the response is finished upstream whether or not the client has it
            raise
        await ctx.settle(account_whole())
        return reply

    return await exchange(request, ctx, route, headers, body, failed=failed, on_stream=on_stream, on_whole=on_whole)


def _poll_answer(responses: Adapter, raw: bytes, encoding: str | None) -> ResponseInfo | None:
    """A poll's answer read as its API's body (read after the client has it); None if it cannot be decoded."""
    try:
        parsed = decode_body(raw, encoding, 1 << 30)
    except BodyTooLarge:
        return None
    return responses.parse_response(parsed) if parsed is not None else None
