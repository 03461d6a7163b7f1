"""The proxy is invisible: bytes, headers and streams cross it unchanged (real SDKs, real proxy)."""

from __future__ import annotations

import asyncio
import gzip
import time
from pathlib import Path

import aiohttp
import httpx
import openai
import orjson
import pytest
from google import genai
from google.genai import types

from tests.e2e import payloads
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply, closed_port

HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


def _openai(proxy_url: str, sent: list[httpx.Request], **headers: str) -> openai.AsyncOpenAI:
    async def capture(request: httpx.Request) -> None:
        sent.append(request)

    return openai.AsyncOpenAI(
        base_url=proxy_url + "/v1",
        api_key="sk-test-transparent",
        max_retries=0,
        default_headers=headers or None,
        http_client=httpx.AsyncClient(event_hooks={"request": [capture]}),
    )


def _same_request(client_side: httpx.Request, upstream_side: Received) -> None:
    assert upstream_side.body == client_side.content
    assert upstream_side.method == client_side.method
    expected = {k.lower(): v for k, v in client_side.headers.items() if k.lower() not in HOP | {"x-run-id"}}
    received = {k.lower(): v for k, v in upstream_side.headers.items() if k.lower() not in HOP}
    assert received == expected


async def test_chat_non_stream_bytes_both_ways(upstream: FakeUpstream, proxy_url: str) -> None:
    body = orjson.dumps(payloads.chat_completion("Bonjour"))
    upstream.script = lambda _: Reply(200, body, {"Content-Type": "application/json", "x-request-id": "req_123"})
    sent: list[httpx.Request] = []
    client = _openai(proxy_url, sent, **{"X-Run-Id": "run-transparent"})
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hi in French"}]
    )
    assert raw.http_response.content == body
    assert raw.http_response.headers["x-request-id"] == "req_123"
    assert raw.http_response.headers["x-runguard-run-id"] == "run-transparent"
    assert raw.parse().choices[0].message.content == "Bonjour"
    assert len(upstream.received) == 1
    assert upstream.received[0].path == "/v1/chat/completions"
    _same_request(sent[0], upstream.received[0])


async def test_chat_stream_bytes_equal_and_parsed(upstream: FakeUpstream, proxy_url: str) -> None:
    chunks = payloads.chat_stream("streaming works", with_usage=True)
    upstream.script = lambda _: Reply.sse(chunks)
    sent: list[httpx.Request] = []
    client = _openai(proxy_url, sent)
    async with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        received = await response.read()
    assert received == b"".join(chunks)
    _same_request(sent[0], upstream.received[0])
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "streaming works"


async def test_responses_non_stream_and_stream(upstream: FakeUpstream, proxy_url: str) -> None:
    body = orjson.dumps(payloads.response_object("plain"))
    chunks = payloads.responses_stream("a streamed answer")
    upstream.script = lambda r: Reply.sse(chunks) if r.json().get("stream") else Reply(200, body)
    sent: list[httpx.Request] = []
    client = _openai(proxy_url, sent)
    raw = await client.responses.with_raw_response.create(model="gpt-4o", input="hello")
    assert raw.http_response.content == body
    assert raw.parse().output_text == "plain"
    _same_request(sent[0], upstream.received[0])
    async with client.responses.stream(model="gpt-4o", input="hello") as stream:
        final = await stream.get_final_response()
    assert final.output_text == "a streamed answer"


async def test_gemini_generate_and_stream_through_google_genai(upstream: FakeUpstream, proxy_url: str) -> None:
    body = orjson.dumps(payloads.gemini_response("hola"))
    chunks = payloads.gemini_stream("streamed gemini text")
    upstream.script = lambda r: Reply.sse(chunks) if "stream" in r.path else Reply(200, body)
    client = genai.Client(api_key="test-gemini-key", http_options=types.HttpOptions(base_url=proxy_url))
    result = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert result.text == "hola"
    assert result.usage_metadata is not None and result.usage_metadata.prompt_token_count == 7
    received = upstream.received[-1]
    assert received.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert received.headers["x-goog-api-key"] == "test-gemini-key"
    pieces = [
        c.text async for c in await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
    ]
    assert "".join(p or "" for p in pieces) == "streamed gemini text"
    assert upstream.received[-1].query == "alt=sse"


async def test_raw_bytes_query_key_and_gzip_pass_untouched(upstream: FakeUpstream, proxy_url: str) -> None:
    payload = orjson.dumps(payloads.gemini_response("compressed"))
    compressed = gzip.compress(payload)
    upstream.script = lambda _: Reply(200, compressed, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    request_body = gzip.compress(orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}))
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.post(
            proxy_url + "/v1beta/models/gemini-2.5-flash:generateContent?key=AIza-test-key&alt=json",
            data=request_body,
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json", "Accept-Encoding": "gzip"},
        ) as response,
    ):
        got = await response.read()
        assert response.headers["Content-Encoding"] == "gzip"
    assert got == compressed
    received = upstream.received[-1]
    assert received.query == "key=AIza-test-key&alt=json"
    assert received.body == request_body


async def test_stream_is_relayed_as_it_arrives_not_buffered(upstream: FakeUpstream, proxy_url: str) -> None:
    chunks = payloads.chat_stream("slow stream")
    upstream.script = lambda _: Reply.sse(chunks, delay=0.4)
    client = _openai(proxy_url, [])
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True
    )
    arrivals = [time.perf_counter() - start async for _ in stream]
    # Each chunk reaches the client about when the upstream sends it (0.4 s apart).
    assert arrivals[0] < 1.0
    assert arrivals[-1] - arrivals[0] > 0.4 * (len(arrivals) - 2)


async def test_stream_headers_do_not_wait_for_a_slow_first_chunk(upstream: FakeUpstream, proxy_url: str) -> None:
    # The proxy sends a stream's headers together with its first chunk, but a slow
    # first chunk must not hold back the status and headers the upstream already sent.
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("late"), delay=1.0)
    async with aiohttp.ClientSession() as session:
        start = time.perf_counter()
        async with session.post(
            proxy_url + "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "go"}]},
            headers={"Authorization": "Bearer sk-test-headers"},
        ) as response:
            headers_at = time.perf_counter() - start
            first = await response.content.readany()
            first_at = time.perf_counter() - start
            assert response.status == 200
            assert response.headers["Content-Type"] == "text/event-stream"
            assert first.startswith(b"data: ")
    assert headers_at < 0.5
    assert first_at > 0.9


async def test_client_disconnect_cancels_the_upstream_request(upstream: FakeUpstream, proxy_url: str) -> None:
    chunks = payloads.chat_stream("x" * 40) * 20
    upstream.script = lambda _: Reply.sse(chunks, delay=0.1)
    async with aiohttp.ClientSession() as session:
        response = await session.post(
            proxy_url + "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "long"}]},
            headers={"Authorization": "Bearer sk-test-leaver"},
        )
        await response.content.readany()
        response.close()
    for _ in range(50):
        if upstream.cancelled:
            break
        await asyncio.sleep(0.05)
    assert upstream.cancelled == 1
    assert upstream.in_flight == 0


async def test_unknown_paths_are_forwarded_untouched(upstream: FakeUpstream, proxy_url: str) -> None:
    upstream.script = lambda r: Reply.json({"object": "list", "data": [{"id": "gpt-4o"}], "path": r.path})
    client = _openai(proxy_url, [])
    models = await client.models.list()
    assert [m.id for m in models.data] == ["gpt-4o"]
    async with aiohttp.ClientSession() as session:
        async with session.post(proxy_url + "/v1beta/models/gemini-2.5-flash:countTokens", json={"contents": []}) as r:
            assert (await r.json())["path"] == "/v1beta/models/gemini-2.5-flash:countTokens"
        async with session.get(proxy_url + "/not-a-provider") as r:
            assert r.status == 404
            assert "error" in await r.json()


async def test_google_genai_file_upload_goes_through_the_proxy(
    upstream: FakeUpstream, proxy_url: str, tmp_path: Path
) -> None:
    """`files.upload` starts at `{base_url}/upload/v1beta/files` and sends its bytes to the upload URL
    the provider returns, which google-genai moves onto the base URL's host: both steps cross the proxy."""
    stored = {"name": "files/abc", "mimeType": "text/plain", "sizeBytes": "6", "state": "ACTIVE"}

    def script(received: Received) -> Reply:
        if received.headers.get("X-Goog-Upload-Command") == "start":
            upload_url = f"{upstream.url}/upload/v1beta/files?upload_id=u1&upload_protocol=resumable"
            return Reply.json({}, headers={"X-Goog-Upload-URL": upload_url, "X-Goog-Upload-Status": "active"})
        return Reply.json({"file": stored}, headers={"X-Goog-Upload-Status": "final"})

    upstream.script = script
    document = tmp_path / "notes.txt"
    document.write_text("hello\n")
    client = genai.Client(api_key="AIza-test-upload", http_options=types.HttpOptions(base_url=proxy_url))
    uploaded = await client.aio.files.upload(file=document)
    assert uploaded.name == "files/abc"
    assert [(r.path, r.headers["X-Goog-Upload-Command"]) for r in upstream.received] == [
        ("/upload/v1beta/files", "start"),
        ("/upload/v1beta/files", "upload, finalize"),
    ]
    assert upstream.received[1].body == b"hello\n"


async def test_a_file_upload_larger_than_the_body_limit_streams_through_untouched(
    upstream: FakeUpstream, sink: ListSink, tmp_path: Path
) -> None:
    """A batch input file of 3 MB through a proxy whose body limit is 1 MB: only the model requests RunGuard
    reads are bounded; anything it forwards unread streams on as it arrives."""
    upstream.script = lambda received: Reply.json({"id": "file-1", "object": "file", "bytes": len(received.body)})
    running = await start_proxy(settings_for(upstream.url, server={"max_body_bytes": 1 << 20}), sink=sink)
    sent: list[httpx.Request] = []
    client = _openai(running.url, sent)
    batch = tmp_path / "batch.jsonl"
    line = orjson.dumps({"custom_id": "r", "method": "POST", "url": "/v1/chat/completions", "body": {"x": "y" * 900}})
    batch.write_bytes(b"\n".join([line] * 3300))  # about 3 MB
    try:
        uploaded = await client.files.create(file=batch, purpose="batch")
        with pytest.raises(openai.APIStatusError) as refused:  # a model request over the limit is still refused
            await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "x" * (2 << 20)}]
            )
    finally:
        await client.close()
        await running.stop()
    assert refused.value.status_code == 413
    (received,) = upstream.received
    assert received.path == "/v1/files"
    assert batch.read_bytes() in received.body and b'name="purpose"' in received.body
    assert received.headers["Content-Length"] == str(len(received.body))
    assert uploaded.bytes == len(received.body)


async def test_providers_are_reached_through_the_environment_s_proxy_when_asked(
    upstream: FakeUpstream, sink: ListSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A company whose egress goes through an HTTP proxy: the SDK honoured HTTPS_PROXY / HTTP_PROXY, and so does
    RunGuard with `upstreams.trust_env` (the provider's address here answers nothing; the proxy does)."""
    upstream.script = lambda received: Reply.json(payloads.chat_completion("through the company proxy"))
    monkeypatch.setenv("HTTP_PROXY", upstream.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    unreachable = {"openai": f"http://127.0.0.1:{closed_port()}"}
    for trust_env, expected in ((False, 502), (True, 200)):
        settings = settings_for(upstream.url, upstreams={**unreachable, "trust_env": trust_env})
        running = await start_proxy(settings, sink=sink)
        try:
            async with aiohttp.ClientSession() as session:
                body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
                url = running.url + "/v1/chat/completions"
                async with session.post(url, json=body, headers={"Authorization": "Bearer sk-egress"}) as reply:
                    assert reply.status == expected
        finally:
            await running.stop()
    (proxied,) = upstream.received
    assert proxied.path == "/v1/chat/completions"
    assert proxied.headers["Host"] == unreachable["openai"].removeprefix("http://")
    assert proxied.headers["Authorization"] == "Bearer sk-egress"


async def test_google_genai_on_api_version_v1_reaches_gemini_and_openai_still_reaches_openai(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """google-genai with `api_version="v1"` gets models at `/v1/models`, the path OpenAI lists its models
    at: the Gemini key it carries sends it to Gemini; the same path with a bearer key goes to OpenAI."""
    model = {"name": "models/gemini-2.0-flash", "displayName": "Gemini 2.0 Flash", "inputTokenLimit": 1048576}
    upstream.script = lambda received: Reply.json(model)
    openai_upstream = f"http://127.0.0.1:{closed_port()}"
    running = await start_proxy(settings_for(upstream.url, upstreams={"openai": openai_upstream}), sink=sink)
    try:
        options = types.HttpOptions(base_url=running.url, api_version="v1")
        client = genai.Client(api_key="AIza-test-v1", http_options=options)
        got = await client.aio.models.get(model="gemini-2.0-flash")
        assert got.display_name == "Gemini 2.0 Flash"
        assert [(r.path, r.headers["x-goog-api-key"]) for r in upstream.received] == [
            ("/v1/models/gemini-2.0-flash", "AIza-test-v1")
        ]
        async with aiohttp.ClientSession() as session:
            bearer = {"Authorization": "Bearer sk-test-v1"}
            async with session.get(running.url + "/v1/models", headers=bearer) as reply:
                assert reply.status == 502  # the OpenAI upstream (nothing listens there)
        assert len(upstream.received) == 1
    finally:
        await running.stop()
