"""Upstream faults: what the client gets, and that retry-cascade accounting sees every one of them.

The client gets the upstream's own error where there is one, otherwise a
provider-style 502 (unreachable) or 504 (timeout). A stream that breaks off
ends in the provider's own error event, so the SDKs raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from openai.types.chat import ChatCompletionChunk

from tests.e2e import payloads
from tests.e2e.faults import eventually, proxy, requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.served import serving
from tests.support.upstream import FakeUpstream, Received, Reply, closed_port, trickle

FAST = {"connect_timeout": 0.3, "first_byte_timeout": 0.4, "idle_timeout": 0.3}
CHAT_BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}]}


def _openai(url: str, run: str = "run-fault") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=url + "/v1", api_key="sk-fault", max_retries=0, default_headers={"X-Run-Id": run}
    )


def _gemini(url: str) -> genai.Client:
    return genai.Client(api_key="g-fault", http_options=types.HttpOptions(base_url=url, headers={"X-Run-Id": "g"}))


async def _chat_error(url: str) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        await _openai(url).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
    return caught.value


async def _gemini_error(url: str) -> genai_errors.APIError:
    client = _gemini(url)  # keep a reference: a collected client closes its session
    with pytest.raises(genai_errors.APIError) as caught:
        await client.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    return caught.value


async def _read_chat(stream: openai.AsyncStream[ChatCompletionChunk], seen: list[str]) -> None:
    async for chunk in stream:
        seen.append(chunk.choices[0].delta.content or "" if chunk.choices else "")


async def _read_gemini(chunks: AsyncIterator[types.GenerateContentResponse], got: list[str]) -> None:
    async for chunk in chunks:
        got.append(chunk.text or "")


async def test_connection_refused_is_a_provider_style_502() -> None:
    sink = ListSink()
    async with proxy(f"http://127.0.0.1:{closed_port()}", sink, upstreams=FAST) as url:
        error = await _chat_error(url)
        assert isinstance(error, openai.InternalServerError)
        assert (error.status_code, error.code) == (502, "upstream_unreachable")
        assert "cannot connect to 127.0.0.1" in error.message
        assert error.response.headers["x-runguard-run-id"] == "run-fault"  # the run it was recorded in
        gemini = await _gemini_error(url)
        assert (gemini.code, gemini.status) == (502, "UNAVAILABLE")
        async with aiohttp.ClientSession() as session, session.get(url + "/v1/models") as r:  # passthrough too
            assert r.status == 502 and (await r.json())["error"]["code"] == "upstream_unreachable"
    records = requests_of(sink)
    assert [(r.status, r.error, r.upstream_ms is not None) for r in records] == [(502, "UpstreamError", True)] * 2


async def test_dns_failure_is_a_502() -> None:
    async with proxy("http://runguard-no-such-host.invalid", upstreams=FAST) as url:
        error = await _chat_error(url)
    assert error.status_code == 502
    assert "runguard-no-such-host.invalid" in error.message


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: connecting hangs until the connect timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in (*fillers, server):
        sock.close()


async def test_connect_timeout_is_a_504(full_backlog: int) -> None:
    async with proxy(f"http://127.0.0.1:{full_backlog}", upstreams={**FAST, "connect_timeout": 0.2}) as url:
        error = await _chat_error(url)
    assert (error.status_code, error.code) == (504, "upstream_timeout")
    assert "connect" in error.message


async def test_first_byte_timeout_is_a_504_and_abandons_the_upstream_call(upstream: FakeUpstream) -> None:
    """The window is a second, not FAST's 0.4 s: the clock starts before the proxy connects, so a pause
    of the test's one event loop (a full garbage collection late in the suite) longer than the window
    would time the request out before it was sent, and the upstream would have nothing to abandon."""
    upstream.script = lambda _: Reply(hang=True)
    sink = ListSink()
    async with proxy(upstream.url, sink, upstreams={**FAST, "first_byte_timeout": 1.0, "idle_timeout": 5.0}) as url:
        error = await _chat_error(url)
        assert (error.status_code, error.code) == (504, "upstream_timeout")
        assert error.response.headers["x-runguard-run-id"] == "run-fault"
        gemini = await _gemini_error(url)
        assert (gemini.code, gemini.status) == (504, "DEADLINE_EXCEEDED")
        await eventually(lambda: upstream.cancelled == 2, within=5.0)
        assert upstream.in_flight == 0
    assert [r.error for r in requests_of(sink)] == ["UpstreamTimeout"] * 2


async def test_headers_may_take_longer_than_the_idle_timeout_up_to_the_first_byte_timeout(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """A model that thinks before it answers: the wait for the headers is first_byte_timeout's, not
    idle_timeout's (aiohttp's read timeout would otherwise cut it at the idle timeout)."""
    body = orjson.dumps(payloads.chat_completion("thought it over"))
    upstream.script = lambda _: Reply(body=body, delay=1.0)
    async with proxy(upstream.url, sink, upstreams={**FAST, "first_byte_timeout": 5.0}) as url:
        done = await _openai(url).chat.completions.create(model="gpt-4o-mini", messages=CHAT_BODY["messages"])
    assert done.choices[0].message.content == "thought it over"
    assert requests_of(sink)[-1].status == 200


async def test_upstream_5xx_passes_through_with_its_own_body(upstream: FakeUpstream, sink: ListSink) -> None:
    own = {"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}
    upstream.script = lambda _: Reply.json(own, status=500, headers={"x-request-id": "req_5xx"})
    async with proxy(upstream.url, sink) as url:
        client = _openai(url)
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
    assert caught.value.status_code == 500
    assert caught.value.body == own["error"]
    assert caught.value.response.headers["x-request-id"] == "req_5xx"
    assert requests_of(sink)[-1].status == 500


async def test_non_stream_body_that_breaks_off_or_stalls(upstream: FakeUpstream, sink: ListSink) -> None:
    body = orjson.dumps(payloads.chat_completion("never whole"))
    halves = [body[:20], body[20:]]
    async with proxy(upstream.url, sink, upstreams=FAST) as url:
        upstream.script = lambda _: Reply(200, b"", {"Content-Type": "application/json"}, chunks=halves, reset_after=1)
        error = await _chat_error(url)
        assert (error.status_code, error.code) == (502, "upstream_unreachable")
        upstream.script = lambda _: Reply(200, b"", {"Content-Type": "application/json"}, chunks=halves, stall_after=1)
        error = await _chat_error(url)
        assert (error.status_code, error.code) == (504, "upstream_timeout")
    assert [(r.status, r.error) for r in requests_of(sink)] == [(502, "UpstreamError"), (504, "UpstreamTimeout")]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply.sse(payloads.chat_stream("partial text"), reset_after=2), "upstream_reset"),
        (Reply.sse(payloads.chat_stream("partial text"), stall_after=2), "upstream_idle_timeout"),
    ],
    ids=["reset", "idle-timeout"],
)
async def test_chat_stream_broken_mid_way_raises_api_error(
    upstream: FakeUpstream, sink: ListSink, reply: Reply, error: str
) -> None:
    upstream.script = lambda _: reply
    async with proxy(upstream.url, sink, upstreams=FAST) as url:
        stream = await _openai(url).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True
        )
        seen: list[str] = []
        with pytest.raises(openai.APIError) as caught:
            await _read_chat(stream, seen)
    assert not isinstance(caught.value, openai.APIStatusError)  # the in-stream error event, not a status
    assert "mid-stream" in caught.value.message or "idle" in caught.value.message
    assert "".join(seen) == "partia"  # what came before the break reached the client (first half)
    record = requests_of(sink)[-1]
    assert (record.status, record.error) == (200, error)
    assert record.output_tokens > 0  # partial output, estimated


@pytest.mark.parametrize("broken", [{"reset_after": 1}, {"stall_after": 1}], ids=["reset", "idle-timeout"])
async def test_gemini_stream_broken_mid_way_raises(
    upstream: FakeUpstream, sink: ListSink, broken: dict[str, int]
) -> None:
    upstream.script = lambda _: Reply.sse(payloads.gemini_stream("first part then more"), **broken)
    async with proxy(upstream.url, sink, upstreams=FAST) as url:
        got: list[str] = []
        client = _gemini(url)
        chunks = await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
        with pytest.raises(genai_errors.ServerError) as caught:
            await _read_gemini(chunks, got)
    assert caught.value.status == "UNAVAILABLE"
    assert got  # the first chunk arrived before the error
    assert requests_of(sink)[-1].error in ("upstream_reset", "upstream_idle_timeout")


async def test_stream_broken_inside_an_event_still_ends_with_a_clean_error_event(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """The half-sent event is held back, so the SDK sees whole chunks, then the error event (not bad JSON)."""
    upstream.script = lambda _: Reply.sse(trickle(b"".join(payloads.chat_stream("split events")), 45), reset_after=5)
    async with proxy(upstream.url, sink, upstreams=FAST) as url:
        stream = await _openai(url).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True
        )
        seen: list[str] = []
        with pytest.raises(openai.APIError) as caught:
            await _read_chat(stream, seen)
    assert "mid-stream" in caught.value.message
    assert requests_of(sink)[-1].error == "upstream_reset"


async def test_responses_stream_broken_mid_way_ends_with_an_error_event(upstream: FakeUpstream) -> None:
    """The stream ends in the Responses `error` event: the SDK raises it, or yields it and never completes."""
    upstream.script = lambda _: Reply.sse(payloads.responses_stream("half an answer"), reset_after=3)
    events: list[Any] = []
    async with (
        proxy(upstream.url, upstreams=FAST) as url,
        _openai(url).responses.stream(model="gpt-4o", input="hello") as stream,
    ):
        raised: openai.APIError | None = None
        try:
            async for event in stream:
                events.append(event)
        except openai.APIError as exc:
            raised = exc
        if raised is not None:
            assert "mid-stream" in raised.message
            return
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            await stream.get_final_response()
    assert events[-1].type == "error"
    assert "mid-stream" in events[-1].message


async def test_slow_trickle_within_the_idle_timeout_arrives_whole(upstream: FakeUpstream, sink: ListSink) -> None:
    whole = b"".join(payloads.chat_stream("a slow but steady answer", with_usage=True))
    upstream.script = lambda _: Reply.sse(trickle(whole, 60), delay=0.03)
    async with proxy(upstream.url, sink, upstreams=FAST) as url, aiohttp.ClientSession() as session:
        body = {**CHAT_BODY, "stream": True, "stream_options": {"include_usage": True}}
        async with session.post(url + "/v1/chat/completions", json=body) as r:
            assert await r.read() == whole
    record = requests_of(sink)[-1]
    assert (record.error, record.input_tokens, record.output_tokens, record.usage_estimated) == (None, 9, 4, False)


async def test_two_consecutive_failures_of_any_kind_open_retry_cascade(upstream: FakeUpstream, sink: ListSink) -> None:
    """A 503, then a stream reset mid-way: the key+model breaker opens; the third call never goes upstream."""
    replies = iter(
        [
            Reply.json({"error": {"message": "overloaded"}}, status=503),
            Reply.sse(payloads.chat_stream("x"), reset_after=1),
        ]
    )
    upstream.script = lambda _: next(replies)
    async with proxy(upstream.url, sink, upstreams=FAST) as url:
        client = _openai(url, run="cascade")
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "1"}])
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "2"}], stream=True
        )
        with pytest.raises(openai.APIError):
            await _read_chat(stream, [])
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "3"}])
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.response.headers["x-runguard-trip"] == "retry_cascade"
    assert len(upstream.received) == 2
    assert [t.detector for t in trips_of(sink)] == ["retry_cascade"]
    records = requests_of(sink)
    assert [r.status for r in records[:2]] == [503, 200]
    assert records[1].error == "upstream_reset"
    # the failure that opened the breaker reached the client as the upstream sent it: tripped, not blocked
    assert records[1].blocked_by is None
    assert [t.request_index for t in trips_of(sink)] == [records[1].index]
    assert (records[2].status, records[2].blocked_by, records[2].upstream_ms) == (429, "retry_cascade", None)


async def test_unreachable_upstream_opens_retry_cascade_too() -> None:
    sink = ListSink()
    async with proxy(f"http://127.0.0.1:{closed_port()}", sink, upstreams=FAST) as url:
        for _ in range(2):
            assert (await _chat_error(url)).status_code == 502
        error = await _chat_error(url)
    assert isinstance(error, openai.RateLimitError)
    assert [t.detector for t in trips_of(sink)] == ["retry_cascade"]


def _one_huge_line(request: Received, megabytes: int = 0) -> Reply:
    """A stream whose second event is one `data:` line of `megabytes` (a content delta), then a normal end."""
    if not orjson.loads(request.body).get("stream"):
        return Reply.json(payloads.chat_completion("quick"))
    first, *rest = payloads.chat_stream("fine", with_usage=True)
    head = b'data: {"id":"chatcmpl-s","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"'
    piece = b"a" * (1 << 20)
    tail = b'"},"finish_reason":null}]}\n\n'
    return Reply.sse([first, head, *([piece] * megabytes), tail, *rest])


@pytest.mark.slow
@pytest.mark.parametrize("megabytes", [30, 100])
async def test_a_huge_sse_line_is_relayed_whole_and_stalls_no_other_tenant(
    upstream: FakeUpstream, tmp_path: Path, megabytes: int
) -> None:
    """The proxy relays every byte of the huge event, skips reading it (counted as an unparsable event), and
    another tenant's requests are answered meanwhile as usual. Before, a 30 MB line was parsed whole on the
    event loop (the other tenant waited 761 ms), and 100 MB made the parser drop the rest of the stream."""
    upstream.script = functools.partial(_one_huge_line, megabytes=megabytes)
    waits: list[float] = []
    async with serving(upstream.url, tmp_path) as served, aiohttp.ClientSession() as session:
        chat = served.url + "/v1/chat/completions"

        async def huge() -> int:
            body = {**CHAT_BODY, "stream": True}
            headers = {"Authorization": "Bearer sk-huge-tenant", "X-Run-Id": "huge"}
            received = 0
            async with session.post(chat, json=body, headers=headers) as response:
                async for chunk in response.content.iter_any():
                    received += len(chunk)
            return received

        streaming = asyncio.ensure_future(huge())
        while not streaming.done():  # another tenant, small requests one after another
            began = time.perf_counter()
            headers = {"Authorization": "Bearer sk-other-tenant", "X-Run-Id": f"small-{len(waits)}"}
            async with session.post(chat, json=CHAT_BODY, headers=headers) as response:
                assert response.status == 200
            waits.append(time.perf_counter() - began)
        streamed = _one_huge_line(Received("POST", "", "", {}, b'{"stream":true}'), megabytes)
        sent = sum(len(chunk) for chunk in streamed.chunks or ())
        assert await streaming == sent  # every byte relayed
        metrics = await (await session.get(served.url + "/runguard/metrics")).text()
    print(f"other tenant: {len(waits)} requests, slowest {max(waits) * 1000:.0f} ms")
    assert 'runguard_parse_errors_total{api="chat",body="response"} 1.0' in metrics  # the skipped event, counted
    assert len(waits) >= 3 and max(waits) < 0.5, waits
