"""The minimal Python pass-through: what a bare aiohttp reverse proxy costs, in its own process.

    python -m bench.passthrough --upstream http://127.0.0.1:PORT [--port 0]

Reads the request body, forwards method, path, query, headers and body over
one pooled keep-alive `aiohttp.ClientSession`, and relays the answer: SSE chunk
by chunk as it arrives, anything else whole. No parsing, no state: the
baseline every RunGuard figure is compared with.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from bench import serving

_HOP = frozenset(
    (
        "host",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "upgrade",
        "proxy-connection",
        "te",
        "trailer",
    )
)
_UPSTREAM: web.AppKey[str] = web.AppKey("upstream", str)
_SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)


def filtered(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in _HOP:
            out.add(name, value)
    return out


def upstream_call(request: web.Request, body: bytes) -> Any:
    """The request sent on upstream as it came (less hop-by-hop headers), as an `async with` context."""
    url = URL(request.app[_UPSTREAM] + request.raw_path, encoded=True)
    return request.app[_SESSION].request(
        request.method, url, headers=filtered(request.headers), data=body or None, allow_redirects=False
    )


async def handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    async with upstream_call(request, body) as upstream:
        headers = filtered(upstream.headers)
        if upstream.content_type == "text/event-stream":
            out = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out
        return web.Response(status=upstream.status, reason=upstream.reason, headers=headers, body=await upstream.read())


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_app(upstream: str, handler: Handler = handle) -> web.Application:
    """The server around `handler`: the upstream's base URL and one pooled keep-alive session in the app."""
    app = web.Application(client_max_size=1 << 30)
    app[_UPSTREAM] = upstream.rstrip("/")

    async def session_lifetime(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=256, keepalive_timeout=60)
        app[_SESSION] = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("Accept-Encoding", "Accept", "User-Agent", "Content-Type"),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=300),
        )
        yield
        await app[_SESSION].close()

    app.cleanup_ctx.append(session_lifetime)
    app.router.add_route("*", "/{tail:.*}", handler)
    return app


def main(handler: Handler = handle, description: str = "The minimal aiohttp pass-through baseline.") -> None:
    """Serve `handler` in front of `--upstream` until stopped (the baselines' command line)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args()
    app = make_app(args.upstream, handler)
    serving.run(lambda: serving.serve(app, args.host, args.port), use_uvloop=not args.no_uvloop)


if __name__ == "__main__":
    main()
