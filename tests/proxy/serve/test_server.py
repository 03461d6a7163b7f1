"""Running an app on a socket as `serve` does: the real port when 0 was asked for, request bodies left
compressed as sent, a handler cancelled when its client goes away, in-flight requests finished on stop,
and unparsable requests answered without echo (the runner is `http.errors.ProxyRunner`)."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from runguard.proxy.serve.server import Running, start


class Seen:
    """What the handlers saw."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.cancelled = asyncio.Event()
        self.slow_started = asyncio.Event()


def _app(seen: Seen) -> web.Application:
    async def echo(request: web.Request) -> web.Response:
        seen.bodies.append(await request.read())
        return web.Response(body=b"done")

    async def slow(request: web.Request) -> web.Response:
        seen.slow_started.set()
        try:
            await asyncio.sleep(float(request.query.get("seconds", "0.5")))
        except asyncio.CancelledError:
            seen.cancelled.set()
            raise
        return web.Response(body=b"finished")

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_get("/slow", slow)
    return app


@pytest.fixture
async def running() -> AsyncIterator[tuple[Running, Seen]]:
    seen = Seen()
    served = await start(_app(seen), "127.0.0.1", 0, grace=5.0)
    yield served, seen
    await served.stop()


async def test_port_zero_gives_a_free_port_and_its_url(running: tuple[Running, Seen]) -> None:
    served, _ = running
    assert served.port > 0 and served.url == f"http://127.0.0.1:{served.port}"
    async with httpx.AsyncClient() as client:
        assert (await client.post(served.url + "/echo", content=b"x")).text == "done"


def test_an_ipv6_host_is_bracketed_in_the_url() -> None:
    assert Running(runner=None, host="::1", port=8787).url == "http://[::1]:8787"  # type: ignore[arg-type]


async def test_a_compressed_body_reaches_the_handler_as_sent(running: tuple[Running, Seen]) -> None:
    served, seen = running
    packed = gzip.compress(b'{"model": "gpt-4o-mini"}')
    async with httpx.AsyncClient() as client:
        await client.post(served.url + "/echo", content=packed, headers={"Content-Encoding": "gzip"})
    assert seen.bodies == [packed]


async def test_a_client_that_goes_away_cancels_its_handler(running: tuple[Running, Seen]) -> None:
    served, seen = running
    _, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /slow?seconds=60 HTTP/1.1\r\nHost: x\r\n\r\n")  # far longer than the test
    await writer.drain()
    await asyncio.wait_for(seen.slow_started.wait(), 5)
    writer.close()
    await asyncio.wait_for(seen.cancelled.wait(), 5)


async def test_stopping_lets_a_request_in_flight_finish() -> None:
    seen = Seen()
    served = await start(_app(seen), "127.0.0.1", 0, grace=5.0)
    async with httpx.AsyncClient() as client:
        answer = asyncio.create_task(client.get(served.url + "/slow"))
        await asyncio.wait_for(seen.slow_started.wait(), 5)
        await served.stop()
        assert (await answer).text == "finished"
    assert not seen.cancelled.is_set()


async def test_an_unparsable_request_gets_the_quiet_400(running: tuple[Running, Seen]) -> None:
    served, _ = running
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /?key=AIzaSecret HTTP/1.1 junk\r\nHost: x\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert answer.split(b" ")[1] == b"400" and b"AIzaSecret" not in answer and b"malformed_request" in answer
