"""An admitted request forwarded and its answer relayed within its passage: what each way of ending records.

The real proxy on loopback in front of the fake upstream, with aiohttp as the client (so a test can leave
mid-stream).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply, closed_port

ASK: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "find the invoice"}]}
HEADERS = {"Authorization": "Bearer sk-forward", "X-Run-Id": "forward-run"}


def records(sink: ListSink) -> list[RequestRecord]:
    return [r for r in sink.records if isinstance(r, RequestRecord)]


@pytest.fixture
async def proxy(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[str]:
    running = await start_proxy(settings_for(upstream.url, store={"record_bodies": True}), sink=sink)
    yield running.url
    await running.stop()


async def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + "/v1/chat/completions", json=body, headers=HEADERS) as response,
    ):
        return response.status, dict(response.headers), await response.read()


async def test_a_whole_answer_is_relayed_with_the_run_s_header_and_recorded_with_its_bodies(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("Invoice #42", usage=(30, 7)))
    status, headers, body = await post(proxy, ASK)
    assert status == 200 and headers["x-runguard-run-id"] == "forward-run"
    assert orjson.loads(body)["choices"][0]["message"]["content"] == "Invoice #42"
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert (record.status, record.error, record.input_tokens, record.output_tokens) == (200, None, 30, 7)
    assert record.upstream_ms is not None and record.body is not None
    assert orjson.loads(record.body.request) == ASK and b"Invoice #42" in record.body.response


async def test_an_upstream_that_cannot_be_reached_is_a_recorded_failure(sink: ListSink) -> None:
    running = await start_proxy(settings_for(f"http://127.0.0.1:{closed_port()}"), sink=sink)
    try:
        status, headers, _ = await post(running.url, ASK)
    finally:
        await running.stop()
    assert status == 502 and headers["x-runguard-run-id"] == "forward-run"
    (record,) = records(sink)
    assert record.status == 502 and record.error is not None and record.output_tokens == 0


async def test_a_stream_is_relayed_and_its_end_recorded_with_what_was_captured(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("All done here.", with_usage=True))
    status, _, body = await post(proxy, {**ASK, "stream": True})
    assert status == 200 and b"data: [DONE]" in body
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert record.streamed and record.error is None and record.status == 200
    assert record.body is not None and record.body.response == body  # what the client was sent


async def test_a_stream_the_upstream_breaks_is_recorded_as_an_upstream_failure(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("cut short", with_usage=True), reset_after=2)
    with contextlib.suppress(aiohttp.ClientPayloadError):  # the client's stream may end as the upstream's did
        await post(proxy, {**ASK, "stream": True})
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert record.error is not None and record.error != "client_disconnected"


async def test_a_client_that_leaves_mid_stream_is_recorded_with_what_it_was_sent(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    held = asyncio.Event()
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("a long answer", with_usage=False), hold=held)
    async with aiohttp.ClientSession() as session:
        response = await session.post(proxy + "/v1/chat/completions", json={**ASK, "stream": True}, headers=HEADERS)
        await response.content.readany()  # the first event arrived
        response.close()  # the client leaves
    await eventually(lambda: len(records(sink)) == 1)
    held.set()
    (record,) = records(sink)
    assert (record.status, record.error) == (200, "client_disconnected")
    assert record.body is not None
