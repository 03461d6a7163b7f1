"""Opt-in `upstreams.inject_stream_usage`: exact usage for streamed Chat, invisible to the client."""

from __future__ import annotations

from typing import Any

import openai
import orjson

from tests.e2e import payloads
from tests.e2e.faults import proxy, requests_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply, trickle

MESSAGES: list[Any] = [{"role": "user", "content": "count my tokens"}]


def _openai_like_stream(request: Received) -> Reply:
    """What OpenAI sends: with include_usage, every chunk carries `"usage":null` and a usage chunk comes last."""
    asked = request.json().get("stream_options", {}).get("include_usage") is True
    chunks = payloads.chat_stream("exact usage please", with_usage=asked)
    if asked:
        chunks = [c.replace(b"}]}\n\n", b'}],"usage":null}\n\n') for c in chunks]
    return Reply.sse(trickle(b"".join(chunks), 50))  # events split across reads


async def test_injected_usage_is_exact_and_hidden_from_the_sdk(upstream: FakeUpstream) -> None:
    upstream.script = _openai_like_stream
    sink = ListSink()
    async with proxy(upstream.url, sink, upstreams={"inject_stream_usage": True}) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-usage", max_retries=0)
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True, temperature=0.2
        )
        chunks = [chunk async for chunk in stream]
    assert all(chunk.choices for chunk in chunks)  # no usage-only chunk reached the client
    assert all(chunk.usage is None and "usage" not in chunk.model_fields_set for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "exact usage please"
    sent = upstream.received[-1]
    assert sent.json() == {
        "model": "gpt-4o-mini",
        "messages": MESSAGES,
        "stream": True,
        "temperature": 0.2,
        "stream_options": {"include_usage": True},
    }
    assert int(sent.headers["Content-Length"]) == len(sent.body)
    record = requests_of(sink)[-1]
    assert (record.input_tokens, record.output_tokens, record.usage_estimated) == (9, 4, False)


async def test_a_client_that_asked_for_usage_gets_the_bytes_untouched(upstream: FakeUpstream) -> None:
    upstream.script = _openai_like_stream
    async with proxy(upstream.url, upstreams={"inject_stream_usage": True}) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-usage", max_retries=0)
        async with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        ) as response:
            got = await response.read()
    sent = upstream.received[-1]
    assert got == b"".join(_openai_like_stream(sent).chunks or ())
    assert sent.json()["stream_options"] == {"include_usage": True}


async def test_off_by_default_bytes_unchanged_and_usage_estimated(upstream: FakeUpstream) -> None:
    upstream.script = _openai_like_stream
    sink = ListSink()
    async with proxy(upstream.url, sink) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-usage", max_retries=0)
        async with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True
        ) as response:
            got = await response.read()
    sent = upstream.received[-1]
    assert "stream_options" not in sent.json()
    assert got == b"".join(payloads.chat_stream("exact usage please"))
    assert requests_of(sink)[-1].usage_estimated


async def test_non_streamed_requests_are_never_rewritten(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("whole"))
    async with proxy(upstream.url, upstreams={"inject_stream_usage": True}) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-usage", max_retries=0)
        raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    assert raw.http_request.content == upstream.received[-1].body
    assert "stream_options" not in orjson.loads(upstream.received[-1].body)


async def test_a_stream_broken_after_injection_still_ends_with_the_error_event(upstream: FakeUpstream) -> None:
    upstream.script = lambda r: Reply.sse(_openai_like_stream(r).chunks or (), reset_after=8)
    async with proxy(upstream.url, upstreams={"inject_stream_usage": True}) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-usage", max_retries=0)
        async with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True
        ) as response:
            got = await response.read()
    events = [e for e in got.split(b"\n\n") if e]
    assert b'"usage"' not in got
    kinds = [orjson.loads(e.removeprefix(b"data: "))["object"] for e in events[:-1]]
    assert kinds and set(kinds) == {"chat.completion.chunk"}  # whole chunks only, then the error event
    assert orjson.loads(events[-1].removeprefix(b"data: "))["error"]["code"] == "upstream_error"
