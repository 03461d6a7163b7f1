"""A request aiohttp cannot parse is answered with a fixed 400 and logged by its kind only: the line it choked
on (which may hold a key) is neither echoed nor logged."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.support.proxy import settings_for, start_proxy
from tests.support.raw_http import address
from tests.support.upstream import FakeUpstream

KEY = "sk-live-never-echoed-0123456789"


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
        f"GET /v1beta/models?key={KEY} HTTP/1.1 extra\r\nHost: x\r\n\r\n".encode(),  # a bad request line
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\x01\r\n\r\n".encode(),
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
    assert b"malformed_request" in answer and KEY.encode() not in answer
    assert KEY not in caplog.text and "malformed HTTP request" in caplog.text
    assert upstream.received == []
