"""API keys never leave the request they came in: not in logs, records, metrics, errors or the admin API.

The last test does it to a real `serve` process under attack: request lines
aiohttp cannot parse, carrying keys, and an upstream whose errors quote the
key it was sent; then greps its output, its SQLite file, the webhooks and the
answers it wrote for every key.

Distinctive keys go through every path (success, stream, passthrough, bad
input, too large, unknown path, upstream 5xx, refused, timeout, reset
mid-stream, a local retry_cascade answer); everything the proxy emits is
collected and searched for them. Also: the admin API stays off beyond
loopback without a token, and the optional key allowlist answers 403.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import openai
import orjson
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from runguard.config.settings import Settings
from runguard.proxy.cli import main as cli
from runguard.proxy.runs.keys import KeyHasher
from tests.e2e import payloads
from tests.e2e.faults import eventually, proxy, requests_of
from tests.e2e.trust import serving
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply, closed_port

MARK = "LEAKCHECK"
BEARER = f"sk-{MARK}-bearer-7f3a9c"
GOOG = f"AIza{MARK}-header-55b1"
QUERY = f"AIza{MARK}-query-91e2"
KEYS = (BEARER, GOOG, QUERY, MARK)
GEMINI = "/v1beta/models/gemini-2.5-flash"
CHAT_BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}


def _script(request: Received) -> Reply:
    body = request.body
    if b"please-fail" in body:
        return Reply.json({"error": {"message": "boom", "type": "server_error"}}, status=500)
    if b"please-reset" in body:
        return Reply.sse(payloads.chat_stream("cut"), reset_after=2)
    if b"please-hang" in body:
        return Reply(hang=True)
    if request.path.endswith(":streamGenerateContent"):
        return Reply.sse(payloads.gemini_stream("streamed"))
    if request.path.endswith(":generateContent"):
        return Reply.json(payloads.gemini_response("hi"))
    if b'"stream":true' in body:
        return Reply.sse(payloads.chat_stream("streamed", with_usage=True))
    if request.path == "/v1/models":
        return Reply.json({"object": "list", "data": []})
    return Reply.json(payloads.chat_completion("ok"))


class Seen:
    """Everything the proxy gave back to clients."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def call(
        self, session: aiohttp.ClientSession, method: str, url: str, body: Any = None, **headers: str
    ) -> int:
        data = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
        async with session.request(method, url, data=data, headers=headers) as response:
            text = (await response.read()).decode("utf-8", "replace")
            self.texts.append(f"{response.status} {dict(response.headers)} {text}")
            return response.status


async def _every_path(url: str, seen: Seen, run: str) -> None:
    auth = {"Authorization": f"Bearer {BEARER}", "X-Run-Id": run}
    goog = {"x-goog-api-key": GOOG, "X-Run-Id": run + "-g"}
    gbody = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with aiohttp.ClientSession() as s:
        await seen.call(s, "POST", url + "/v1/chat/completions", CHAT_BODY, **auth)
        await seen.call(s, "POST", url + "/v1/chat/completions", {**CHAT_BODY, "stream": True}, **auth)
        await seen.call(s, "POST", url + f"{GEMINI}:generateContent", gbody, **goog)
        await seen.call(s, "POST", url + f"{GEMINI}:streamGenerateContent?alt=sse&key={QUERY}", gbody)
        await seen.call(s, "POST", url + f"{GEMINI}:generateContent?key={QUERY}", gbody, **{"X-Run-Id": run + "-q"})
        await seen.call(s, "GET", url + f"/v1/models?key={QUERY}", **auth)
        await seen.call(s, "POST", url + "/v1/chat/completions", b'{"broken', **auth)
        await seen.call(s, "POST", url + f"{GEMINI}:generateContent?key={QUERY}", b"x" * 70_000)  # too large
        await seen.call(s, "GET", url + f"/nowhere?key={QUERY}", **auth)
        await seen.call(
            s, "POST", url + "/v1/chat/completions", {**CHAT_BODY, "stream": True, "user": "please-reset"}, **auth
        )
        for _ in range(3):  # 500, 500, then retry_cascade answers locally
            await seen.call(s, "POST", url + f"{GEMINI}:generateContent?key={QUERY}", {**gbody, "x": "please-fail"})
        await seen.call(s, "POST", url + "/v1/chat/completions", {**CHAT_BODY, "user": "please-hang"}, **auth)


async def _admin(url: str, seen: Seen, sink: ListSink) -> None:
    async with aiohttp.ClientSession() as s:
        assert await seen.call(s, "GET", url + "/runguard/metrics") == 200
        await seen.call(s, "GET", url + "/runguard/runs")
        await seen.call(s, "GET", url + "/runguard/trips")
        for run_id in {r.run_id for r in requests_of(sink)}:
            assert await seen.call(s, "GET", url + f"/runguard/runs/{run_id}") == 200
        for key_hash in {r.key_hash for r in requests_of(sink)}:
            reset = url + f"/runguard/keys/{key_hash}/reset?model=gpt-4o-mini"
            assert await seen.call(s, "POST", reset, {}, **{"Content-Type": "application/json"}) == 200


def _assert_clean(where: str, text: str) -> None:
    for key in KEYS:
        assert key not in text, f"{key!r} leaked into {where}"


FAST = {"connect_timeout": 0.3, "first_byte_timeout": 0.3, "idle_timeout": 0.3}


async def test_keys_never_leak(
    upstream: FakeUpstream, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream.script = _script
    sink = ListSink()
    seen = Seen()
    sections: dict[str, Any] = {"store": {"record_bodies": True}, "server": {"max_body_bytes": 65536}}
    async with proxy(upstream.url, sink, upstreams=FAST, **sections) as url:
        await _every_path(url, seen, "secret-run")
        await _admin(url, seen, sink)
    for dead in (f"http://127.0.0.1:{closed_port()}", "http://runguard-no-such-host.invalid"):
        async with proxy(dead, sink, upstreams=FAST, **sections) as url, aiohttp.ClientSession() as s:
            await seen.call(s, "POST", url + f"{GEMINI}:generateContent?key={QUERY}", {"contents": []})
            await seen.call(s, "POST", url + "/v1/chat/completions", CHAT_BODY, Authorization=f"Bearer {BEARER}")
    statuses = {int(t.split(" ", 1)[0]) for t in seen.texts}
    # 400: `/v1/models?key=` with a Bearer of another key carries two different keys (`credentials`)
    assert statuses == {200, 400, 404, 413, 429, 500, 501, 502, 504}
    access_log = capsys.readouterr().out  # the proxies wrote their access lines to stdout by the time they stopped
    assert access_log.count('"run_id"') >= 10
    assert len(upstream.received) >= 10 and any(QUERY in r.query for r in upstream.received)  # keys still go upstream
    _assert_clean("client responses", "\n".join(seen.texts))
    _assert_clean("logs", caplog.text + "\n".join(repr(r.args) + str(r.exc_info) for r in caplog.records))
    _assert_clean("the access log", access_log)
    _assert_clean("records", repr(sink.records))
    key_hashes = {r.key_hash for r in requests_of(sink)}
    assert key_hashes >= {KeyHasher(b"test-salt").hash(k) for k in (BEARER, GOOG, QUERY)}


async def test_admin_api_stays_off_beyond_loopback_without_a_token(upstream: FakeUpstream) -> None:
    async with proxy(upstream.url, server={"host": "0.0.0.0"}) as url, aiohttp.ClientSession() as s:
        async with s.get(url + "/runguard/runs/some-run") as r:
            assert r.status == 403 and "disabled" in (await r.json())["error"]
        async with s.post(url + "/runguard/runs/some-run/reset") as r:
            assert r.status == 403
        async with s.get(url + "/runguard/metrics") as r:
            assert r.status == 200


def test_serve_beyond_loopback_without_token_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[Settings] = []

    async def fake_serve(settings: Settings) -> None:
        started.append(settings)

    monkeypatch.setattr(cli, "_serve", fake_serve)
    monkeypatch.delenv("RUNGUARD_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("RUNGUARD_CONFIG", raising=False)
    cli.serve(host="0.0.0.0", port=0, config=None, shadow=None)  # what `runguard-proxy serve --host 0.0.0.0` runs
    assert "the admin API is disabled" in capsys.readouterr().err
    assert started[0].server.host == "0.0.0.0"
    cli.serve(host=None, port=0, config=None, shadow=None)
    assert "admin API" not in capsys.readouterr().err
    assert started[1].server.host == "127.0.0.1"


def test_bind_warning_decision() -> None:
    def warns(**server: Any) -> bool:
        return cli.bind_warning(Settings.model_validate({"server": server})) is not None

    assert not warns()
    assert not warns(host="::1")
    assert not warns(host="localhost")
    assert warns(host="0.0.0.0")
    assert warns(host="10.1.2.3")
    assert not warns(host="0.0.0.0", admin_token="t0ken")


ALLOWED = "sk-allowed-key"


@pytest.fixture
async def allowlisted(upstream: FakeUpstream) -> AsyncIterator[str]:
    upstream.script = _script
    allow = [KeyHasher(b"test-salt").hash(ALLOWED)]
    async with proxy(upstream.url, runs={"key_allowlist": allow}) as url:
        yield url


async def test_allowlist_refuses_other_keys_with_a_provider_style_403(upstream: FakeUpstream, allowlisted: str) -> None:
    good = openai.AsyncOpenAI(base_url=allowlisted + "/v1", api_key=ALLOWED, max_retries=0)
    assert (await good.chat.completions.create(**CHAT_BODY)).choices[0].message.content == "ok"
    bad = openai.AsyncOpenAI(base_url=allowlisted + "/v1", api_key=BEARER, max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as caught:
        await bad.chat.completions.create(**CHAT_BODY)
    assert caught.value.code == "key_not_allowed"
    assert BEARER not in caught.value.message
    with pytest.raises(openai.PermissionDeniedError):
        await bad.models.list()  # passthrough routes are covered too
    gemini = genai.Client(api_key=GOOG, http_options=types.HttpOptions(base_url=allowlisted))
    with pytest.raises(genai_errors.ClientError) as refused:
        await gemini.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert (refused.value.code, refused.value.status) == (403, "PERMISSION_DENIED")
    async with aiohttp.ClientSession() as s, s.post(allowlisted + "/v1/chat/completions", json=CHAT_BODY) as r:
        assert r.status == 403  # no key at all
    assert len(upstream.received) == 1


# -- the real `serve` process under attack -----------------------------------------------------------

CUSTOM = f"corp-{MARK}-opaque-7781"  # a credential of no known shape: only its exact value can be masked
SERVE_KEYS = (*KEYS, CUSTOM)
# Request lines and headers aiohttp cannot parse, each carrying a key where its error message would quote it.
MALFORMED = (
    f"GET {GEMINI}:generateContent?key={QUERY} HTTP/1.1 junk\r\nHost: x\r\n\r\n".encode(),
    f"GET {GEMINI}:generateContent?key={QUERY}\x01 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
    f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {BEARER}\x01\r\n\r\n".encode(),
    f"POST {GEMINI}:generateContent HTTP/1.1\r\nHost: x\r\nx-goog-api-key: {GOOG}\x7f\r\n\r\n".encode(),
    f"POST /v1/chat/completions?key={QUERY} HTTP/1.1\r\nAuthorization: Bearer {BEARER}\r\nBad Header\r\n\r\n".encode(),
)


def _credential_of(request: Received) -> str:
    headers = {name.lower(): value for name, value in request.headers.items()}
    bearer = headers.get("authorization", "").partition(" ")[2]
    return bearer or headers.get("x-goog-api-key") or parse_qs(request.query).get("key", [""])[0]


def _echoing(request: Received) -> Reply:
    """An upstream whose errors quote the credential it was sent (as some gateways and providers do)."""
    if request.path == "/hook":
        return Reply.json({"ok": True})
    echo = f"Incorrect API key provided: {_credential_of(request)}. Find your key in the dashboard"
    gemini = request.path.startswith("/v1beta")
    if b"please-echo" in request.body:
        if gemini:
            return Reply.json({"error": {"code": 400, "message": echo, "status": "INVALID_ARGUMENT"}}, status=400)
        return Reply.json({"error": {"message": echo, "type": "invalid_request_error", "code": "invalid_api_key"}}, 401)
    if b"please-fail-echo" in request.body:
        return Reply.json({"error": {"code": 500, "message": echo, "status": "INTERNAL"}}, status=500)
    if b"please-stream-echo" in request.body:
        return Reply.sse([b"data: " + orjson.dumps({"error": {"message": echo, "type": "server_error"}}) + b"\n\n"])
    return _script(request)


def _database_bytes(database: Path) -> bytes:
    """The SQLite file and its journals (-wal, -shm), as bytes."""
    return b"".join(path.read_bytes() for path in sorted(database.parent.glob(database.name + "*")))


async def _raw(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return answer


async def test_a_serve_process_under_attack_writes_no_key_anywhere(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = _echoing
    database = tmp_path / "records.db"
    sections: dict[str, Any] = {
        "store": {"database_url": f"sqlite+aiosqlite:///{database}", "record_bodies": True},
        "alerts": {"webhooks": [upstream.url + "/hook"], "retries": 0},
    }
    ours = Seen()  # answers the proxy wrote itself (the upstream's own answers reach their client unchanged)
    async with serving(tmp_path, upstream.url, **sections) as served, aiohttp.ClientSession() as s:
        url = served.url
        gbody = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        auth = {"Authorization": f"Bearer {CUSTOM}", "X-Run-Id": "leak-run"}
        assert await Seen().call(s, "POST", url + "/v1/chat/completions", CHAT_BODY, **auth) == 200
        assert await Seen().call(s, "POST", url + "/v1/chat/completions", {**CHAT_BODY, "user": "please-echo"}, **auth)
        streamed = {**CHAT_BODY, "stream": True, "user": "please-stream-echo"}
        await Seen().call(s, "POST", url + "/v1/chat/completions", streamed, Authorization=f"Bearer {BEARER}")
        await Seen().call(
            s, "POST", url + f"{GEMINI}:generateContent", {**gbody, "x": "please-echo"}, **{"x-goog-api-key": GOOG}
        )
        failing = {**gbody, "x": "please-fail-echo"}
        for _ in range(2):  # two upstream failures quoting the key: retry_cascade trips, a webhook goes out
            assert await Seen().call(s, "POST", url + f"{GEMINI}:generateContent?key={QUERY}", failing) == 500
        assert await ours.call(s, "POST", url + f"{GEMINI}:generateContent?key={QUERY}", failing) == 429
        for request in MALFORMED:
            answer = await _raw(url, request)
            assert answer.startswith(b"HTTP/1.1 400") or answer.startswith(b"HTTP/1.0 400"), answer
            ours.texts.append(answer.decode("utf-8", "replace"))
        await eventually(lambda: any(r.path == "/hook" for r in upstream.received), within=5.0)
    assert await served.stop() == 0
    hooks = [r.body.decode() for r in upstream.received if r.path == "/hook"]
    stored = _database_bytes(database)
    assert b"leak-run" in stored and b"Incorrect API key provided: <redacted>" in stored  # stored, masked
    assert any("retry_cascade" in hook for hook in hooks)
    assert served.stdout and "malformed HTTP request" in served.text()
    outputs = {
        "the process's stdout and stderr (logs, access log)": served.text(),
        "the record store": stored.decode("utf-8", "replace"),
        "webhook bodies": "\n".join(hooks),
        "the answers the proxy wrote": "\n".join(ours.texts),
    }
    for where, text in outputs.items():
        for key in SERVE_KEYS:
            assert key not in text, f"{key!r} leaked into {where}"
