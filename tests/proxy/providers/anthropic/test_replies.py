"""Anthropic synthetic answers, parsed by the real anthropic SDK (its own httpx2 transport mocked: no network).

The request the SDK really sent is parsed by the adapter first, so a stop is
built from that request (its model, stream flag, forced tool or schema).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import orjson
import pytest

from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.anthropic import replies
from runguard.proxy.providers.anthropic.adapter import AnthropicAdapter
from runguard.proxy.providers.base import RequestContext

NOTICE = StopNotice(
    "repeat_call",
    "run-7",
    "tool 'search' was called with the same arguments 4 times",
    "Reset with: runguard-proxy reset run-7",
)
MODEL = "claude-sonnet-4-6"
MESSAGES: Any = [{"role": "user", "content": "Find the invoice."}]
Answer = Callable[[httpx2.Request], Synthetic | httpx2.Response]


class Wire:
    """Every request the SDK sends, answered by `answer`."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[httpx2.Request] = []

    def _respond(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        found = self.answer(request)
        if isinstance(found, httpx2.Response):
            return found
        return httpx2.Response(found.status, headers=dict(found.headers), content=found.body)

    def client(self) -> anthropic.Anthropic:
        transport = httpx2.MockTransport(self._respond)
        return anthropic.Anthropic(api_key="sk-ant-test", http_client=httpx2.Client(transport=transport))

    def async_client(self) -> anthropic.AsyncAnthropic:
        async def respond(request: httpx2.Request) -> httpx2.Response:
            await request.aread()
            return self._respond(request)

        transport = httpx2.MockTransport(respond)
        return anthropic.AsyncAnthropic(api_key="sk-ant-test", http_client=httpx2.AsyncClient(transport=transport))


def stop(request: httpx2.Request) -> Synthetic:
    info = AnthropicAdapter().parse_request(request.content, RequestContext())
    assert info.parse_error is None
    answer = AnthropicAdapter().stop_response(NOTICE, info)
    assert answer is not None and answer.status == 200
    return answer


def error(request: httpx2.Request) -> Synthetic:
    info = AnthropicAdapter().parse_request(request.content, RequestContext())
    return AnthropicAdapter().error_response(NOTICE, stream=info.stream)


def names_the_trip(text: str) -> bool:
    return all(part in text for part in ("repeat_call", "run-7", "4 times", "runguard-proxy reset run-7"))


def names_the_stop(text: str) -> bool:
    return all(part in text for part in ("repeat_call", "run-7", "4 times")) and "runguard-proxy" not in text


@pytest.mark.parametrize("stream", [False, True])
def test_error_raises_rate_limit_error_after_one_request(stream: bool) -> None:
    wire = Wire(error)
    with pytest.raises(anthropic.RateLimitError) as caught:
        wire.client().messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=stream)
    assert len(wire.requests) == 1  # x-should-retry: false beats the SDK's 2 retries of a 429
    found = caught.value
    assert found.status_code == 429
    assert found.response.headers["x-should-retry"] == "false"
    assert found.request_id is not None and found.request_id.startswith("req_runguard")
    body = found.body
    assert isinstance(body, dict) and body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert names_the_trip(body["error"]["message"])


def test_a_429_without_the_header_is_retried_by_the_sdk() -> None:
    """What the header buys: the same body without it is retried (2 retries by default)."""

    def plain(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(429, headers={"retry-after": "0"}, content=replies.error_body(429, "slow down"))

    wire = Wire(plain)
    with pytest.raises(anthropic.RateLimitError):
        wire.client().messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    assert len(wire.requests) == 3


def test_async_error_raises_rate_limit_error_after_one_request() -> None:
    wire = Wire(error)

    async def call() -> None:
        await wire.async_client().messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)

    with pytest.raises(anthropic.RateLimitError):
        asyncio.run(call())
    assert len(wire.requests) == 1


def test_stop_is_a_message_that_ends_the_turn() -> None:
    message = Wire(stop).client().messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    assert message.stop_reason == "end_turn"
    assert message.model == MODEL
    assert message.content[0].type == "text" and names_the_stop(message.content[0].text)


def test_stop_streamed_is_the_full_event_sequence() -> None:
    events = list(Wire(stop).client().messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True))
    kinds = [event.type for event in events]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]  # and the ping between them is skipped by the SDK, as Anthropic's own


def test_stop_through_the_stream_helper_sync_and_async() -> None:
    with Wire(stop).client().messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert names_the_stop(text) and final.stop_reason == "end_turn"

    async def run() -> anthropic.types.Message:
        client = Wire(stop).async_client()
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as events:
            return await events.get_final_message()

    assert asyncio.run(run()).stop_reason == "end_turn"


SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}, "total": {"type": "number"}},
    "required": ["message", "total"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("stream", [False, True])
def test_stop_for_a_json_schema_request_is_json_of_that_schema(stream: bool) -> None:
    client = Wire(stop).client()
    config: Any = {"format": {"type": "json_schema", "schema": SCHEMA}}
    if stream:
        with client.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES, output_config=config) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, output_config=config)
    assert message.content[0].type == "text"
    value = orjson.loads(message.content[0].text)
    assert set(value) == {"message", "total"} and names_the_stop(value["message"])


@pytest.mark.parametrize("stream", [False, True])
def test_stop_for_a_forced_tool_is_a_call_of_that_tool(stream: bool) -> None:
    tool: Any = {"name": "final_result", "description": "The answer", "input_schema": SCHEMA}
    kwargs: Any = {"tools": [tool], "tool_choice": {"type": "tool", "name": "final_result"}}
    client = Wire(stop).client()
    if stream:
        with client.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES, **kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, **kwargs)
    assert message.stop_reason == "tool_use"
    call = message.content[0]
    assert call.type == "tool_use" and call.name == "final_result"
    assert isinstance(call.input, dict) and names_the_stop(call.input["message"])


def test_mid_stream_error_event_raises_and_is_not_retried() -> None:
    began = stop(httpx2.Request("POST", "http://x/v1/messages", json={"model": MODEL, "stream": True, **{}})).body
    head = began[: began.index(b"event: content_block_stop")]  # message_start .. a text delta
    tail = replies.stream_error_event("upstream broke mid-stream", "upstream_error")
    wire = Wire(lambda _: httpx2.Response(200, headers={"Content-Type": "text/event-stream"}, content=head + tail))
    seen: list[str] = []
    events = wire.client().messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True)
    with pytest.raises(anthropic.APIStatusError) as caught:
        seen.extend(event.type for event in events)
    assert "upstream broke mid-stream (upstream_error)" in str(caught.value)
    body = caught.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "api_error"
    assert seen[0] == "message_start" and "content_block_delta" in seen
    assert len(wire.requests) == 1


def test_error_types_by_status() -> None:
    assert orjson.loads(replies.error_body(400, "x"))["error"]["type"] == "invalid_request_error"
    assert orjson.loads(replies.error_body(502, "x"))["error"]["type"] == "api_error"
    assert orjson.loads(replies.error_body(529, "x"))["error"]["type"] == "overloaded_error"
