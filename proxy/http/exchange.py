"""The upstream exchange, said once: send the request, note the overhead, relay a stream or read a whole
body, and answer a failure, for a guarded request (`forward`) and an untouched one (`untouched`).

What is done with the answer is the caller's: `on_stream` relays a stream (the upstream response still
open), `on_whole` answers with a whole body already read, `failed` answers an upstream that could not be
reached, timed out or broke off while its whole body was read. Both answer callbacks get `sent`, the
`time.perf_counter()` at which the upstream's response headers were in (a poll's latency counts from it).
The overhead marks (`relay.overhead`) bracket each wait for the upstream.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from runguard.proxy.core.errors import UpstreamError
from runguard.proxy.providers.routes import Route, raw_target
from runguard.proxy.relay import ProxyContext, is_stream, overhead, read_whole

Failed = Callable[[UpstreamError], web.StreamResponse]
OnStream = Callable[[aiohttp.ClientResponse, float], Awaitable[web.StreamResponse]]
OnWhole = Callable[[aiohttp.ClientResponse, bytes, float], Awaitable[web.StreamResponse]]
Answered = Callable[[int], Awaitable[None]]  # the upstream's status, as soon as its headers are in


async def exchange(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    headers: CIMultiDict[str],
    body: bytes | aiohttp.StreamReader,
    *,
    failed: Failed,
    on_stream: OnStream,
    on_whole: OnWhole,
    answered: Answered | None = None,
) -> web.StreamResponse:
    """Send `body` with `headers` to the route's upstream (the path and query `raw_target` builds) and hand
    its answer to `on_stream` or `on_whole`, or its failure to `failed` (see the module docstring).
    `answered` is told the upstream's status as soon as its headers are in, before the client sees a byte."""
    watch = overhead.of(request) or overhead.Stopwatch()  # (a request the app's metrics did not time: none)
    watch.sending()
    try:
        upstream = await ctx.upstreams[route.provider].send(
            request.method, raw_target(route, request.raw_path), headers, body
        )
    except UpstreamError as exc:
        return failed(exc)
    async with upstream:
        sent = time.perf_counter()
        watch.answered()
        if answered is not None:
            await answered(upstream.status)
        if is_stream(upstream, route.stream):
            return await on_stream(upstream, sent)
        watch.sending()
        try:
            raw = await read_whole(upstream)
        except UpstreamError as exc:
            return failed(exc)
        watch.answered()
        return await on_whole(upstream, raw, sent)
