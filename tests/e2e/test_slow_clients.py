"""Slow and idle clients are bounded (issue 33, item 7), against the real `serve` process.

The attacks: slowloris connections that drip a request head a byte at a time
(and one that sends nothing), a request body that stops half-way, and a
keep-alive connection left idle. With short timeouts configured they are all
closed within a second or two of their deadline, and nothing of a stalled
request reaches the provider; a slow but moving body, and a long stream to
the client, are not cut. Before: aiohttp's defaults held every one of these
connections for an hour (keep-alive 3,630 s, no head or body deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import orjson
import pytest

from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.support.processes import ServeProcess
from tests.support.raw_http import address, head
from tests.support.served import serving
from tests.support.upstream import FakeUpstream, Reply

pytestmark = pytest.mark.slow  # each test starts the serve process

HEAD_S, BODY_S, IDLE_S = 1.0, 1.0, 1.5
SLACK_S = 1.5  # the most a closing may lag its deadline on a loaded machine
CHAT_BODY = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture
async def served(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[ServeProcess]:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("fine"))
    # The head's deadline through its environment variable, the others through the file.
    env = {"RUNGUARD_SERVER__HEADER_TIMEOUT": str(HEAD_S)}
    async with serving(upstream.url, tmp_path, env, server={"body_timeout": BODY_S, "keepalive_timeout": IDLE_S}) as p:
        yield p


async def _closed_after(url: str, sent: bytes, drip_every: float | None, within: float) -> float:
    """Seconds until the proxy closes a connection on which `sent` goes out (a byte every `drip_every` seconds,
    or at once if None, then nothing); fails if it is still open after `within` seconds."""
    reader, writer = await asyncio.open_connection(*address(url))
    began = time.monotonic()

    async def send() -> None:
        if drip_every is None:
            writer.write(sent)
            return
        for byte in sent:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(drip_every)

    sending = asyncio.ensure_future(send())
    try:
        async with asyncio.timeout(within):
            with contextlib.suppress(ConnectionResetError):  # closed with bytes unread: the kernel resets it
                while await reader.read(65536):  # an answer may come first (an idle keep-alive connection's)
                    pass
        return time.monotonic() - began
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sending
        writer.close()


async def test_slowloris_heads_and_silent_connections_are_closed(served: ServeProcess) -> None:
    host = "127.0.0.1"
    dripped = head("POST", "/v1/chat/completions", host, {"Authorization": "Bearer sk-slow"}, 10) * 4
    attackers = [_closed_after(served.url, dripped, 0.1, HEAD_S + SLACK_S) for _ in range(40)]
    attackers += [_closed_after(served.url, b"", None, HEAD_S + SLACK_S) for _ in range(10)]  # open, say nothing
    client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-fine", max_retries=0)
    during = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    *lasted, answer = await asyncio.gather(*attackers, during)
    await client.close()
    assert answer.choices[0].message.content == "fine"  # the proxy serves others meanwhile
    assert all(HEAD_S / 2 <= seconds <= HEAD_S + SLACK_S for seconds in lasted), lasted  # not at once: at the deadline


async def test_a_body_that_stalls_is_abandoned_and_never_forwarded(
    served: ServeProcess, upstream: FakeUpstream
) -> None:
    host = "127.0.0.1"
    guarded = head("POST", "/v1/chat/completions", host, {"Authorization": "Bearer sk-slow"}, len(CHAT_BODY))
    upload = head("POST", "/v1/files", host, {"Authorization": "Bearer sk-slow"}, 100_000)  # streamed upstream
    lasted = await asyncio.gather(
        _closed_after(served.url, guarded + CHAT_BODY[:20], None, BODY_S + SLACK_S),
        _closed_after(served.url, upload + b"x" * 50_000, None, BODY_S + SLACK_S),
    )
    assert all(seconds >= BODY_S / 2 for seconds in lasted), lasted
    # The upload, streamed upstream as it came, was dropped there when its client was cut.
    await eventually(lambda: upstream.cancelled == 1 and upstream.in_flight == 0, within=5.0)
    assert upstream.received == []  # the chat request never went; the upload never arrived whole


async def test_a_slow_body_that_keeps_moving_is_not_cut(served: ServeProcess, upstream: FakeUpstream) -> None:
    reader, writer = await asyncio.open_connection(*address(served.url))
    headers = {"Authorization": "Bearer sk-slow", "Connection": "close"}
    writer.write(head("POST", "/v1/chat/completions", "127.0.0.1", headers, len(CHAT_BODY)))
    for at in range(0, len(CHAT_BODY), 8):  # ~3 s in all, never more than a third of the deadline between pieces
        writer.write(CHAT_BODY[at : at + 8])
        await writer.drain()
        await asyncio.sleep(BODY_S / 3)
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200")
    assert upstream.received[-1].body == CHAT_BODY


async def test_an_idle_keep_alive_connection_is_closed(served: ServeProcess) -> None:
    ask = head("GET", "/runguard/health", "127.0.0.1", None, None)
    lasted = await _closed_after(served.url, ask, None, IDLE_S + SLACK_S)
    assert lasted >= IDLE_S / 2


async def test_a_long_stream_to_the_client_is_not_cut(served: ServeProcess, upstream: FakeUpstream) -> None:
    words = [f"w{i} " for i in range(8)]
    chunks = [
        b"data: "
        + orjson.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "delta": {"content": word}}],
            }
        )
        + b"\n\n"
        for word in words
    ] + [b"data: [DONE]\n\n"]
    upstream.script = lambda _: Reply.sse(chunks, delay=0.5)  # 4.5 s: longer than every client deadline
    client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-stream", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "tell me"}], stream=True
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    await client.close()
    assert text == "".join(words)
