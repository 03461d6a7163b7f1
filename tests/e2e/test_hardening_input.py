"""Bad input from clients and from upstream: a provider-native error, or bytes passed through untouched.

Nothing here may crash a worker or count against a run: after each case a
normal request still goes through and is recorded as the run's first.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import brotli
import openai
import orjson
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.e2e import payloads
from tests.e2e.faults import proxy, requests_of
from tests.e2e.trust import serving
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Reply

CHAT = "/v1/chat/completions"
GEMINI = "/v1beta/models/gemini-2.5-flash:generateContent"
UPSTREAM_400 = {"error": {"message": "upstream says: bad JSON", "type": "invalid_request_error", "code": None}}


async def _post(url: str, data: bytes, content_type: str = "application/json") -> tuple[int, bytes, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=data, headers={"Content-Type": content_type, "Authorization": "Bearer sk-in"}) as r,
    ):
        return r.status, await r.read(), r.content_type


async def _still_healthy(proxy_url: str, upstream: FakeUpstream, sink: ListSink) -> None:
    """A normal request after the bad ones: answered, and the first of its run (nothing leaked into state)."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("fine"))
    client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="sk-in", max_retries=0)
    reply = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "still there?"}], extra_headers={"X-Run-Id": "after"}
    )
    assert reply.choices[0].message.content == "fine"
    record = requests_of(sink)[-1]
    assert (record.run_id, record.index, record.status) == ("after", 1, 200)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "unterminated', "application/json"),
        (b"", "application/json"),
        (b"[1, 2, 3]", "application/json"),
        (b'{"model":"gpt-4o","messages":[{"role":"user","content":"\xff\xfe bad utf-8"}]}', "application/json"),
        (b'{"model":"gpt-4o","messages":' + b"[" * 5000 + b"]" * 5000 + b"}", "application/json"),
        (b"model=gpt-4o&messages=hi", "application/x-www-form-urlencoded"),
    ],
    ids=["malformed", "empty", "not-an-object", "invalid-utf8", "nested-5000", "form-encoded"],
)
async def test_unparsable_bodies_are_forwarded_untouched(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink, body: bytes, content_type: str
) -> None:
    upstream.script = lambda _: Reply.json(UPSTREAM_400, status=400)
    status, got, _ = await _post(proxy_url + CHAT, body, content_type)
    assert (status, orjson.loads(got)) == (400, UPSTREAM_400)  # the upstream's own answer
    received = upstream.received[-1]
    assert received.body == body
    assert received.headers["Content-Type"] == content_type
    # Fail open, yet counted: a request of its key's anonymous run, recorded with its parse error.
    (record,) = requests_of(sink)
    assert record.status == 400 and record.error is not None and record.error.startswith("unreadable request: ")
    await _still_healthy(proxy_url, upstream, sink)


async def test_wrong_content_type_with_a_valid_body_is_guarded_and_forwarded(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    body = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    status, _, _ = await _post(proxy_url + CHAT, body, "text/plain")
    assert status == 200
    assert upstream.received[-1].body == body
    assert upstream.received[-1].headers["Content-Type"] == "text/plain"
    assert requests_of(sink)[-1].status == 200


async def test_deep_but_legal_nesting_is_parsed_without_recursion_trouble(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("deep"))
    nested = b"[" * 900 + b'{"type":"text","text":"leaf"}' + b"]" * 900  # under orjson's depth limit of 1024
    body = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":' + nested + b"}]}"
    status, _, _ = await _post(proxy_url + CHAT, body)
    assert status == 200
    assert upstream.received[-1].body == body


@pytest.fixture
async def small_proxy(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[str]:
    async with proxy(upstream.url, sink, server={"max_body_bytes": 4096}) as url:
        yield url


async def test_huge_body_gets_a_provider_style_413_openai_sdk(upstream: FakeUpstream, small_proxy: str) -> None:
    client = openai.AsyncOpenAI(base_url=small_proxy + "/v1", api_key="sk-in", max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x" * 10_000}])
    assert caught.value.status_code == 413
    assert caught.value.code == "request_too_large"
    assert "4096" in caught.value.message
    assert upstream.received == []


async def test_huge_body_gets_a_gemini_style_413(upstream: FakeUpstream, small_proxy: str) -> None:
    client = genai.Client(api_key="g-in", http_options=types.HttpOptions(base_url=small_proxy))
    with pytest.raises(genai_errors.ClientError) as caught:
        await client.aio.models.generate_content(model="gemini-2.5-flash", contents="y" * 10_000)
    assert caught.value.code == 413
    assert caught.value.status == "INVALID_ARGUMENT"
    assert upstream.received == []


async def test_huge_chunked_body_and_gzip_bomb_get_413(upstream: FakeUpstream, small_proxy: str) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"z" * 1024

    async with aiohttp.ClientSession() as session:
        async with session.post(small_proxy + CHAT, data=pieces(), headers={"Authorization": "Bearer k"}) as r:
            assert r.status == 413
            assert (await r.json())["error"]["code"] == "request_too_large"
        bomb = gzip.compress(b'{"model":"gpt-4o","messages":[{"role":"user","content":"' + b"a" * 100_000 + b'"}]}')
        assert len(bomb) < 4096
        headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        async with session.post(small_proxy + CHAT, data=bomb, headers=headers) as r:
            assert r.status == 413
            assert "decoded body" in (await r.json())["error"]["message"]
    assert upstream.received == []


async def test_unknown_paths_and_methods(upstream: FakeUpstream, proxy_url: str, sink: ListSink) -> None:
    upstream.script = lambda r: Reply.json({"method": r.method, "path": r.path})
    async with aiohttp.ClientSession() as session:
        for method, path in (("GET", "/nope"), ("POST", "/v2/chat/completions"), ("DELETE", "/favicon.ico")):
            async with session.request(method, proxy_url + path) as r:
                assert r.status == 404
                error = (await r.json())["error"]
                assert error["code"] == "unknown_path" and path in error["message"]
        for method, path in (("DELETE", CHAT), ("PATCH", GEMINI), ("PUT", "/v1/files/f1"), ("PROPFIND", CHAT)):
            async with session.request(method, proxy_url + path) as r:
                assert r.status == 200
                assert await r.json() == {"method": method, "path": path}
    assert len(upstream.received) == 4
    assert requests_of(sink) == []
    await _still_healthy(proxy_url, upstream, sink)


async def test_garbage_request_line_does_not_hurt_the_proxy(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    host, port = proxy_url.removeprefix("http://").split(":")
    for garbage in (b"\x16\x03\x01 TLS hello on a plain port\r\n\r\n", b"GARBAGE\r\n\r\n"):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(garbage)
        assert (await asyncio.wait_for(reader.read(100), 1)).startswith(b"HTTP/1.0 400")
        writer.close()
    await _still_healthy(proxy_url, upstream, sink)


GARBAGE_SSE = [
    b"data: {not json at all}\n\n",
    b"\x00\xff\xfe binary noise without framing",
    b"\r\n\r\nevent: weird\ndata: [1,2,3]\n\n",
    b"data: " + orjson.dumps({"choices": "not a list", "usage": 7}) + b"\n\n",
    b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"tail"}}]}',  # truncated: no blank line, no [DONE]
]


async def test_garbage_and_truncated_sse_from_upstream_pass_through(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.sse(GARBAGE_SSE)
    body = orjson.dumps({"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "go"}]})
    status, got, content_type = await _post(proxy_url + CHAT, body)
    assert (status, content_type) == (200, "text/event-stream")
    assert got == b"".join(GARBAGE_SSE)
    record = requests_of(sink)[-1]
    assert record.status == 200 and record.error is None
    await _still_healthy(proxy_url, upstream, sink)


async def test_truncated_stream_reaches_the_openai_sdk_as_sent(upstream: FakeUpstream, proxy_url: str) -> None:
    chunks = payloads.chat_stream("cut short")[:3]  # role, two content pieces; no finish, no [DONE]
    upstream.script = lambda _: Reply.sse(chunks)
    client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="sk-in", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream]) == "cut short"


async def test_gemini_garbage_stream_passes_through(upstream: FakeUpstream, proxy_url: str) -> None:
    garbage = [b'data: {"candidates": 5}\r\n\r\n', b"data: nonsense\r\n\r\n"]
    upstream.script = lambda _: Reply.sse(garbage)
    url = proxy_url + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    status, got, _ = await _post(url, orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}))
    assert (status, got) == (200, b"".join(garbage))


def _brotli_bomb(prefix: bytes, size: int) -> bytes:
    """`prefix` then about `size` bytes of a 150 KB random text repeated: a brotli body of ~150 KB."""
    unit = base64.b64encode(random.Random(45).randbytes(110_000))
    block = unit * ((8 << 20) // len(unit))
    compressor = brotli.Compressor(quality=2, lgwin=18)
    parts = [compressor.process(prefix)]
    parts += [compressor.process(block) for _ in range(size // len(block))]
    return b"".join([*parts, compressor.finish()])


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.slow
async def test_a_brotli_bomb_is_refused_at_once_in_bounded_memory_while_others_are_served(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    """The attack: a ~150 KB `Content-Encoding: br` body that inflates to 1 GiB, against the real `serve`
    process at the default 32 MB body limit. It once inflated whole on the event loop (RSS +1.7 GB, 7.6 s;
    another tenant waited 2.3 s). Now it is answered 413 as soon as its output passes the limit, the peak
    memory grows by about the limit per bomb, and another tenant's request sent the moment the bombs'
    bodies are sent is answered while they are being refused."""
    bomb = _brotli_bomb(b'{"model":"gpt-4o","messages":[{"role":"user","content":"', 1 << 30)
    assert len(bomb) < 250_000
    upstream.script = lambda _: Reply.json(payloads.chat_completion("fine"))
    async with serving(tmp_path, upstream.url) as served:
        client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-other-tenant", max_retries=0)
        ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        await client.chat.completions.create(**ask)  # type: ignore[call-overload]  # warm: baseline memory
        before = _peak_rss(served.process.pid)
        sent = [asyncio.Event() for _ in range(3)]

        async def attack(done: asyncio.Event) -> tuple[int, bytes]:
            async def body() -> AsyncIterator[bytes]:
                for at in range(0, len(bomb), 64 * 1024):
                    yield bomb[at : at + 64 * 1024]
                done.set()  # the last piece is written: the proxy has the whole bomb

            headers = {"Content-Encoding": "br", "Content-Type": "application/json", "Authorization": "Bearer sk-x"}
            async with (
                aiohttp.ClientSession() as session,
                session.post(served.url + CHAT, data=body(), headers=headers) as r,
            ):
                return r.status, await r.read()

        began = time.monotonic()
        bombs = asyncio.gather(*(attack(done) for done in sent))
        for done in sent:
            await done.wait()
        asked = time.monotonic()
        reply = await client.chat.completions.create(**ask)  # type: ignore[call-overload]
        other = time.monotonic() - asked
        answers = await bombs
        refused = time.monotonic() - began
        grew = _peak_rss(served.process.pid) - before
    assert reply.choices[0].message.content == "fine"
    assert [status for status, _ in answers] == [413] * 3
    assert all(b"request_too_large" in answer for _, answer in answers)
    assert refused < 5.0, f"the bombs took {refused:.2f} s to refuse"
    assert other < 1.0, f"another tenant waited {other:.2f} s"
    assert grew < 400 << 20, f"peak RSS grew {grew >> 20} MB"
    assert len(upstream.received) == 2  # the bombs never went upstream
