"""The Anthropic Messages API through the real proxy, with the anthropic SDK: transparency, routing, keys.

A healthy exchange is byte-identical both ways; a request that carries
`anthropic-version` (or comes under `/anthropic`) reaches the Anthropic
upstream and never OpenAI's, whatever its path; both of the SDK's key
headers are read and hashed like any key; two different keys are refused
with Anthropic's own 400.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from runguard.proxy.store.records import RequestRecord
from tests.e2e.claude import (
    KEY,
    MODEL,
    ClaudeFactory,
    Sent,
    client,
    sync_client,
)
from tests.e2e.faults import eventually, requests_of
from tests.support.anthropic_upstream import Cache, Step, claude, message, message_stream
from tests.support.upstream import Reply

MESSAGES: Any = [{"role": "user", "content": "Hello, Claude"}]
STEP = Step(text="Hello! How can I help?", usage=(15, 9), cache=Cache(read=1200, write_5m=300))


@pytest.mark.parametrize("prefix", ["", "/anthropic"])
async def test_a_healthy_message_is_byte_identical_both_ways(make_claude: ClaudeFactory, prefix: str) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([STEP])
    sent = Sent()
    sdk = client(proxy.url + prefix, sent=sent)
    raw = await sdk.messages.with_raw_response.create(model=MODEL, max_tokens=100, messages=MESSAGES)
    assert raw.http_response.content == orjson.dumps(message(STEP, "msg_fake0000", MODEL))
    assert (await raw.parse()).content[0].text == STEP.text  # type: ignore[union-attr]
    (received,) = proxy.claude.received
    assert received.path == "/v1/messages"
    assert received.body == sent.requests[0].content
    assert received.headers["anthropic-version"] == sent.requests[0].headers["anthropic-version"]
    assert "X-Run-Id" not in received.headers and not proxy.openai.received
    await sdk.close()


@pytest.mark.parametrize("prefix", ["", "/anthropic"])
async def test_a_healthy_stream_is_byte_identical(make_claude: ClaudeFactory, prefix: str) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([STEP])
    sdk = client(proxy.url + prefix)
    async with sdk.messages.with_streaming_response.create(
        model=MODEL, max_tokens=100, messages=MESSAGES, stream=True
    ) as response:
        got = b"".join([chunk async for chunk in response.http_response.aiter_bytes()])
    assert got == b"".join(message_stream(STEP, "msg_fake0000", MODEL))
    await sdk.close()


async def test_sync_client_streams_and_counts_tokens(make_claude: ClaudeFactory) -> None:
    """The sync SDK (in a thread beside the proxy's loop): a message, the stream helper, count_tokens, models."""
    proxy = await make_claude()
    proxy.claude.script = claude([STEP, STEP])

    def run() -> tuple[str, str, int, list[str]]:
        sdk = sync_client(proxy.url)
        plain = sdk.messages.create(model=MODEL, max_tokens=100, messages=MESSAGES)
        with sdk.messages.stream(model=MODEL, max_tokens=100, messages=MESSAGES) as events:
            streamed = events.get_final_text()
        counted = sdk.messages.count_tokens(model=MODEL, messages=MESSAGES).input_tokens
        models = [model.id for model in sdk.models.list()]
        return plain.content[0].text, streamed, counted, models  # type: ignore[union-attr]

    plain, streamed, counted, models = await asyncio.to_thread(run)
    assert plain == streamed == STEP.text and counted == 42 and models == ["claude-haiku-4-5-20251001"]
    paths = [received.path for received in proxy.claude.received]
    assert paths == ["/v1/messages", "/v1/messages", "/v1/messages/count_tokens", "/v1/models"]
    assert not proxy.openai.received


async def test_anthropic_base_url_from_the_environment(
    make_claude: ClaudeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([STEP])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", proxy.url + "/anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    sdk = anthropic.AsyncAnthropic()
    answer = await sdk.messages.create(model=MODEL, max_tokens=100, messages=MESSAGES)
    assert answer.stop_reason == "end_turn" and len(proxy.claude.received) == 1
    await sdk.close()


ANTHROPIC_PATHS = [
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/models",
    "/v1/files",
    "/v1/chat/completions",
    "/v1/responses",
    "/openai/v1/chat/completions",
    "/v1beta/models/gemini-2.5-flash:generateContent",
    "/gemini/v1beta/models",
    "/anthropic/v1/messages",
]


@pytest.mark.parametrize("path", ANTHROPIC_PATHS)
async def test_a_request_with_anthropic_version_never_reaches_openai(make_claude: ClaudeFactory, path: str) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([STEP])
    body = {"model": MODEL, "max_tokens": 10, "messages": MESSAGES}
    headers = {"anthropic-version": "2023-06-01", "x-api-key": KEY, "x-goog-api-key": "AIza-stray"}
    async with httpx.AsyncClient() as http:
        await http.post(proxy.url + path, json=body, headers=headers)
    assert not proxy.openai.received  # OpenAI's and Gemini's fake: neither got it
    (received,) = proxy.claude.received
    assert received.path == path.removeprefix("/anthropic")
    assert received.headers["x-api-key"] == KEY and "x-goog-api-key" not in {h.lower() for h in received.headers}


async def test_a_key_header_alone_does_not_make_a_request_anthropic(make_claude: ClaudeFactory) -> None:
    """OpenAI's /v1/chat/completions with a stray x-api-key stays OpenAI's (the key header is dropped)."""
    proxy = await make_claude()
    async with httpx.AsyncClient() as http:
        await http.post(
            proxy.url + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": MESSAGES},
            headers={"Authorization": "Bearer sk-openai", "x-api-key": KEY},
        )
    assert not proxy.claude.received
    (received,) = proxy.openai.received
    assert "x-api-key" not in {name.lower() for name in received.headers}


def key_hash_of(records: list[RequestRecord]) -> set[str]:
    return {record.key_hash for record in records}


async def test_both_key_headers_are_read_and_hashed_as_one_key(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([STEP, STEP])
    bearer = client(proxy.url, run="keys-bearer", auth_token=KEY, api_key=None)
    header = client(proxy.url, run="keys-header", api_key=None, default_headers={"x-api-key": KEY})
    await bearer.messages.create(model=MODEL, max_tokens=10, messages=MESSAGES)
    await header.messages.create(model=MODEL, max_tokens=10, messages=MESSAGES)
    first, second = proxy.claude.received
    assert first.headers["Authorization"] == f"Bearer {KEY}" and "x-api-key" not in {h.lower() for h in first.headers}
    assert second.headers["x-api-key"] == KEY
    await eventually(lambda: len(requests_of(proxy.sink)) == 2)
    hashes = key_hash_of(requests_of(proxy.sink))
    assert len(hashes) == 1 and KEY not in next(iter(hashes))


async def test_two_different_keys_are_refused_with_anthropics_400(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([STEP])
    sdk = client(proxy.url, api_key="sk-ant-one", default_headers={"x-api-key": "sk-ant-two"}, max_retries=2)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk.messages.create(model=MODEL, max_tokens=10, messages=MESSAGES)
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert not proxy.claude.received and not proxy.openai.received


async def test_the_key_allowlist_applies_to_anthropic_keys(make_claude: ClaudeFactory) -> None:
    proxy = await make_claude()
    proxy.claude.script = claude([STEP, STEP])
    sdk = client(proxy.url, api_key="sk-ant-allowed")
    await sdk.messages.create(model=MODEL, max_tokens=10, messages=MESSAGES)
    await eventually(lambda: len(requests_of(proxy.sink)) == 1)
    allowed = requests_of(proxy.sink)[0].key_hash
    guarded = await make_claude(runs={"key_allowlist": [allowed]})
    guarded.claude.script = claude([STEP])
    ok = client(guarded.url, api_key="sk-ant-allowed")
    assert (await ok.messages.create(model=MODEL, max_tokens=10, messages=MESSAGES)).stop_reason == "end_turn"
    refused = client(guarded.url, api_key="sk-ant-other", max_retries=2)
    with pytest.raises(anthropic.APIStatusError) as caught:
        await refused.messages.create(model=MODEL, max_tokens=10, messages=MESSAGES)
    assert caught.value.status_code == 403
    body = caught.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "permission_error"


async def drain(stream: Any, seen: list[str]) -> None:
    async for event in stream:
        seen.append(event.type)


async def test_a_stream_the_upstream_breaks_ends_with_anthropic_s_error_event(make_claude: ClaudeFactory) -> None:
    """The upstream resets after a few events: the client gets what came, then an `error` event the SDK raises
    (an `APIStatusError`, not retried), instead of a stream that just stops."""
    proxy = await make_claude()
    chunks = message_stream(Step(text="A long answer that breaks off"), "msg_fake0000", MODEL)
    proxy.claude.script = lambda received: Reply(
        200, b"", {"Content-Type": "text/event-stream"}, chunks=chunks, reset_after=3
    )
    sent = Sent()
    sdk = client(proxy.url, sent=sent)
    seen: list[str] = []
    stream = await sdk.messages.create(model=MODEL, max_tokens=100, messages=MESSAGES, stream=True)
    with pytest.raises(anthropic.APIStatusError) as caught:
        await drain(stream, seen)
    assert seen[0] == "message_start"  # what came before the break reached the client
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error" and body["error"]["type"] == "api_error"
    assert len(sent.requests) == 1 and len(proxy.claude.received) == 1
