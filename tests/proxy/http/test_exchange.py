"""`exchange`: one send upstream, its answer handed on whole or as a stream, its failure answered; the waits
for the upstream are the overhead's, not RunGuard's. A real upstream on loopback (`FakeUpstream`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from runguard.config.settings import UpstreamSettings
from runguard.proxy.core.errors import UpstreamError
from runguard.proxy.core.events import Provider
from runguard.proxy.http.exchange import exchange
from runguard.proxy.providers.routes import resolve
from runguard.proxy.relay import overhead
from runguard.proxy.relay.upstream import Upstreams
from tests.support.upstream import FakeUpstream, Reply, closed_port


async def _exchange(base_url: str, path: str = "/v1/models") -> tuple[list[str], web.StreamResponse, Any]:
    upstreams = Upstreams(UpstreamSettings(openai=base_url, first_byte_timeout=5))
    ctx: Any = SimpleNamespace(upstreams=upstreams)
    request = make_mocked_request("GET", path)
    watch = overhead.start(request)
    route = resolve(path)
    assert route is not None and route.provider == Provider.OPENAI
    seen: list[str] = []

    def failed(exc: UpstreamError) -> web.StreamResponse:
        seen.append(f"failed {type(exc).__name__}")
        return web.Response(status=502)

    async def on_stream(upstream: aiohttp.ClientResponse, sent: float) -> web.StreamResponse:
        seen.append(f"stream {(await upstream.read()).decode()}")
        return web.Response(status=upstream.status)

    async def on_whole(upstream: aiohttp.ClientResponse, raw: bytes, sent: float) -> web.StreamResponse:
        seen.append(f"whole {raw.decode()} {sent >= watch.started}")
        return web.Response(status=upstream.status)

    try:
        reply = await exchange(
            request, ctx, route, CIMultiDict(), b"", failed=failed, on_stream=on_stream, on_whole=on_whole
        )
    finally:
        await upstreams.close()
    return seen, reply, watch


async def test_a_whole_answer_is_read_before_it_is_handed_on_and_its_waits_are_the_upstream_s(
    upstream: FakeUpstream,
) -> None:
    upstream.script = lambda _: Reply.json({"data": []})
    seen, reply, watch = await _exchange(upstream.url)
    assert (seen, reply.status) == (['whole {"data":[]} True'], 200)
    assert watch.waited > 0  # the send and the body's read were the upstream's time
    (received,) = upstream.received
    assert (received.method, received.path) == ("GET", "/v1/models")


async def test_a_stream_is_handed_on_open(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.sse([b"data: 1\n\n", b"data: 2\n\n"])
    seen, _, _ = await _exchange(upstream.url)
    assert seen == ["stream data: 1\n\ndata: 2\n\n"]


async def test_an_upstream_nobody_listens_at_is_answered_by_failed() -> None:
    seen, reply, _ = await _exchange(f"http://127.0.0.1:{closed_port()}")
    assert (seen, reply.status) == (["failed UpstreamError"], 502)
