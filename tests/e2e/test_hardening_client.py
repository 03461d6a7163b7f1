"""Client faults and shutdown: an abandoned request cancels its upstream call and is still recorded;
a graceful stop lets in-flight streams finish."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from runguard.proxy.app import create_app
from runguard.proxy.handlers import CONTEXT
from runguard.proxy.server import Running, start
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of
from tests.support.proxy import ListSink, settings_for
from tests.support.upstream import FakeUpstream, Reply

CHAT = "/v1/chat/completions"


async def _serving(upstream: FakeUpstream, sink: ListSink, grace: float) -> Running:
    """The proxy as `serve` runs it: the grace period comes from the settings."""
    settings = settings_for(upstream.url, server={"shutdown_grace_seconds": grace})
    return await start(create_app(settings, sink=sink), "127.0.0.1", 0, settings.server.shutdown_grace_seconds)


def _chat(stream: bool = False) -> bytes:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a long question"}], "stream": stream}
    return orjson.dumps(body)


async def test_client_gone_while_sending_its_body(upstream: FakeUpstream, proxy_url: str, sink: ListSink) -> None:
    host, port = proxy_url.removeprefix("http://").split(":")
    _reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
    writer.write(head.encode() + _chat()[:40])
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.transport.abort()
    await asyncio.sleep(0.1)
    assert upstream.received == []
    assert requests_of(sink) == []
    upstream.script = lambda _: Reply.json(payloads.chat_completion("next"))
    async with aiohttp.ClientSession() as session, session.post(proxy_url + CHAT, data=_chat()) as r:
        assert r.status == 200


async def test_client_gone_before_the_answer_cancels_upstream_and_is_recorded(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply(200, orjson.dumps(payloads.chat_completion("too late")), delay=5.0)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2)) as session:
        try:
            async with session.post(proxy_url + CHAT, data=_chat(), headers={"X-Run-Id": "impatient"}):
                raise AssertionError("the answer should not arrive in time")
        except TimeoutError:
            pass
    await eventually(lambda: upstream.cancelled == 1 and bool(requests_of(sink)))
    assert upstream.in_flight == 0
    record = requests_of(sink)[-1]
    assert (record.run_id, record.status, record.error) == ("impatient", None, "client_disconnected")


async def test_client_gone_mid_stream_records_the_partial_usage(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    chunks = payloads.chat_stream("word " * 50)
    upstream.script = lambda _: Reply.sse(chunks[:2] + [chunks[2]] * 30, delay=0.05)
    async with aiohttp.ClientSession() as session:
        response = await session.post(proxy_url + CHAT, data=_chat(stream=True), headers={"X-Run-Id": "leaver"})
        got = b""
        while b"word" not in got:
            got += await response.content.readany()
        response.close()
    await eventually(lambda: upstream.cancelled == 1 and bool(requests_of(sink)))
    record = requests_of(sink)[-1]
    assert (record.run_id, record.error) == ("leaver", "client_disconnected")
    assert record.usage_estimated and record.output_tokens > 0  # the partial output seen, not zero
    assert record.input_tokens > 0


async def test_graceful_shutdown_drains_an_in_flight_stream(upstream: FakeUpstream) -> None:
    chunks = payloads.chat_stream("drained to the end", with_usage=True)
    upstream.script = lambda _: Reply.sse(chunks, delay=0.12)
    sink = ListSink()
    running = await _serving(upstream, sink, grace=3.0)
    async with aiohttp.ClientSession() as session:
        response = await session.post(running.url + CHAT, data=_chat(stream=True))
        first = await response.content.readany()
        stopping = asyncio.create_task(running.stop())
        await asyncio.sleep(0.05)
        assert not stopping.done()
        rest = await response.read()
        await stopping
    assert first + rest == b"".join(chunks)
    record = requests_of(sink)[-1]
    assert (record.status, record.error, record.output_tokens, record.usage_estimated) == (200, None, 4, False)


async def test_shutdown_grace_period_is_bounded(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("never ends"), stall_after=1)
    running = await _serving(upstream, ListSink(), grace=0.3)
    async with aiohttp.ClientSession() as session:
        response = await session.post(running.url + CHAT, data=_chat(stream=True))
        await response.content.readany()
        started = asyncio.get_running_loop().time()
        await running.stop()
        assert asyncio.get_running_loop().time() - started < 1.5
        response.close()


async def test_shutdown_does_not_wait_the_grace_period_for_a_body_that_stopped_arriving(
    upstream: FakeUpstream,
) -> None:
    # Once the server stops, aiohttp drops the bytes that reach it: a handler still waiting for the
    # rest of a body would otherwise hold the shutdown for the whole grace period.
    sink = ListSink()
    running = await _serving(upstream, sink, grace=30.0)
    host, port = running.url.removeprefix("http://").split(":")
    _reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
    writer.write(head.encode() + _chat()[:40])
    await writer.drain()
    await asyncio.sleep(0.1)  # the handler is waiting for the other 4960 bytes
    started = asyncio.get_running_loop().time()
    await running.stop()
    assert asyncio.get_running_loop().time() - started < 10.0  # not the 30 s grace
    writer.close()
    assert upstream.received == [] and requests_of(sink) == []


async def test_a_body_still_on_its_way_when_the_server_stops_is_answered_503(upstream: FakeUpstream) -> None:
    # After the stop began, the rest of the body will never be read: a provider 503 tells the SDK to retry.
    sink = ListSink()
    app = create_app(settings_for(upstream.url), sink=sink)
    running = await start(app, "127.0.0.1", 0, 5.0)
    try:
        app[CONTEXT].stopping.set()  # as on_shutdown does, without closing the connections yet
        host, port = running.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
        writer.write(head.encode() + _chat()[:40])
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5.0)
        writer.close()
    finally:
        await running.stop()
    assert status_line.startswith(b"HTTP/1.1 503")
    assert upstream.received == []
