"""A request aiohttp cannot parse gets a fixed OpenAI-style 400 and one log line naming its kind: never
the offending line, which may hold a client's key; every other error keeps aiohttp's own handling."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
from aiohttp import web

from runguard.proxy.http.errors import ProxyRunner
from tests.support.proxy import settings_for, start_proxy
from tests.support.raw_http import address
from tests.support.upstream import FakeUpstream

KEY = "sk-proj-malformed0123456789abcdef"


MALFORMED = {
    "bad request line": f"GET /v1/models?key={KEY} HTTP/1.1 extra\r\nHost: x\r\n\r\n".encode(),
    "control byte in a header": f"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\x01\r\n\r\n".encode(),
    "header line too long": f"GET / HTTP/1.1\r\nHost: x\r\nX-Key: {KEY}{'a' * 20000}\r\n\r\n".encode(),
}


async def _ok(_: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _broken(_: web.Request) -> web.Response:
    raise RuntimeError(f"handler bug near {KEY}")


@pytest.fixture
async def served() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/", _ok)
    app.router.add_get("/broken", _broken)
    runner = ProxyRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def _raw(address: str, request: bytes) -> bytes:
    host, port = address.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)  # read to the end: the connection is closed
    finally:
        writer.close()


@pytest.mark.parametrize("kind", MALFORMED)
async def test_an_unparsable_request_is_answered_without_being_repeated(
    served: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        answer = await _raw(served, MALFORMED[kind])
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400", answer[:200]  # HTTP/1.0 when the request line was unreadable
    error = orjson.loads(body)["error"]
    assert error["code"] == "malformed_request" and error["type"] == "runguard_proxy_error"
    assert error["message"].startswith("RunGuard could not parse this HTTP request (")
    assert KEY.encode() not in answer
    assert KEY not in caplog.text and "Traceback" not in caplog.text
    (logged,) = [r for r in caplog.records if r.name == "runguard.http"]
    assert logged.getMessage().startswith("malformed HTTP request from 127.0.0.1: ")


async def test_well_formed_requests_and_other_errors_keep_aiohttp_s_handling(served: str) -> None:
    async with httpx.AsyncClient(base_url=f"http://{served}") as client:
        assert (await client.get("/")).json() == {"ok": True}
        broken = await client.get("/broken")
    assert broken.status_code == 500
    assert KEY not in broken.text  # aiohttp's own 500 does not show the exception either


ECHOED_KEY = "sk-live-never-echoed-0123456789"


async def send(url: str, raw: bytes) -> bytes:
    host, port = address(url)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(raw)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize(
    "raw",
    [
        f"GET /v1beta/models?key={ECHOED_KEY} HTTP/1.1 extra\r\nHost: x\r\n\r\n".encode(),  # a bad request line
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ECHOED_KEY}\x01\r\n\r\n".encode(),
    ],
    ids=["request-line", "header-with-control-byte"],
)
async def test_a_malformed_request_gets_a_fixed_400_that_quotes_nothing_of_it(
    upstream: FakeUpstream, caplog: pytest.LogCaptureFixture, raw: bytes
) -> None:
    running = await start_proxy(settings_for(upstream.url))
    try:
        with caplog.at_level(logging.DEBUG):
            answer = await send(running.url, raw)
    finally:
        await running.stop()
    assert answer.split(b" ", 2)[1] == b"400"
    assert b"malformed_request" in answer and ECHOED_KEY.encode() not in answer
    assert ECHOED_KEY not in caplog.text and "malformed HTTP request" in caplog.text
    assert upstream.received == []
