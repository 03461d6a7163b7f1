"""The key the proxy judges is the key that goes upstream, whatever headers a client sends.

Each test is an attack that once worked: a key named hop-by-hop by `Connection:` (judged, then stripped,
while another key went upstream), a key in a place the provider does not read beside one it does, two
different keys in one request, a junk key to get a fresh per-key budget while the real key goes upstream,
and a browser's Realtime key in a WebSocket subprotocol. The clients are the real SDKs where they can send
the trick (default headers), aiohttp where they cannot.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import openai
import pytest
import yaml
import yarl
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from runguard.proxy.runs.keys import KeyHasher
from tests.conftest import ProxyFactory
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of
from tests.support.processes import start_serve
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

ALLOWED = "sk-allowed-1111"
OTHER = "sk-other-2222"
HASH = KeyHasher(b"test-salt").hash
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:generateContent"


def _script(request: Received) -> Reply:
    if request.path.endswith(":generateContent"):
        return Reply.json(payloads.gemini_response("hi"))
    return Reply.json(payloads.chat_completion("ok"))


def _openai(url: str, key: str, headers: dict[str, str]) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, default_headers=headers, max_retries=0)


def _gemini(url: str, key: str, headers: dict[str, str]) -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=url, headers=headers))


async def test_a_key_named_hop_by_hop_is_not_judged_while_another_goes_upstream(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    """`Authorization: Bearer <allowed>` + `Connection: Authorization` + another key: the allowed key never
    reaches the upstream, so it is not the key judged; the other key is, and is refused."""
    upstream.script = _script
    url = await make_proxy(runs={"key_allowlist": [HASH(ALLOWED)]})
    client = _openai(url, ALLOWED, {"Connection": "Authorization", "x-goog-api-key": OTHER})
    with pytest.raises(openai.PermissionDeniedError):  # a Gemini key on /v1/...: Gemini's path and 403
        await client.chat.completions.create(**CHAT)
    gemini = _gemini(url, OTHER, {"Authorization": f"Bearer {ALLOWED}", "Connection": "Authorization"})
    with pytest.raises(genai_errors.ClientError) as refused:
        await gemini.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert (refused.value.code, refused.value.status) == (403, "PERMISSION_DENIED")
    assert upstream.received == []
    allowed = _openai(url, ALLOWED, {})
    assert (await allowed.chat.completions.create(**CHAT)).choices[0].message.content == "ok"
    assert len(upstream.received) == 1


async def test_a_key_where_gemini_does_not_read_it_is_not_the_key_judged(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    """`x-api-key: <allowed>` with `?key=<other>` on a Gemini path: Gemini reads the query's key."""
    upstream.script = _script
    url = await make_proxy(runs={"key_allowlist": [HASH(ALLOWED)]})
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}{GEMINI_PATH}?key={OTHER}", json=body, headers={"x-api-key": ALLOWED}) as r:
            assert r.status == 403
            assert (await r.json())["error"]["status"] == "PERMISSION_DENIED"
        async with http.post(f"{url}{GEMINI_PATH}?key={ALLOWED}", json=body, headers={"x-api-key": OTHER}) as r:
            assert r.status == 200
    (received,) = upstream.received
    assert received.query == f"key={ALLOWED}"
    assert "x-api-key" not in {name.lower() for name in received.headers}  # Gemini does not read it: not sent


async def test_two_different_keys_in_one_request_are_refused_and_the_same_key_twice_is_not(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = _script
    url = await make_proxy()
    gemini = _gemini(url, ALLOWED, {"Authorization": f"Bearer {OTHER}"})
    with pytest.raises(genai_errors.ClientError) as refused:
        await gemini.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")
    assert "different API keys" in str(refused.value.message)
    assert OTHER not in str(refused.value.message) and ALLOWED not in str(refused.value.message)
    azure_style = _openai(url, ALLOWED, {"api-key": OTHER})
    with pytest.raises(openai.BadRequestError) as caught:
        await azure_style.chat.completions.create(**CHAT)
    assert caught.value.code == "conflicting_credentials"
    assert upstream.received == []
    same = _gemini(url, ALLOWED, {"Authorization": f"Bearer {ALLOWED}"})
    answer = await same.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert answer.text == "hi"
    assert len(upstream.received) == 1


async def test_a_junk_key_does_not_get_a_fresh_breaker_for_the_real_key(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """The real key's retry_cascade breaker is open; a request judged as a junk key, with the real key in
    `api-key` and its `Authorization` named hop-by-hop, is the real key's and is answered locally."""
    upstream.script = lambda _: Reply.json({"error": {"message": "overloaded"}}, status=503)
    url = await make_proxy()
    real = _openai(url, ALLOWED, {})
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            await real.chat.completions.create(**CHAT)
    sneaky = _openai(url, "junk-key-0001", {"Connection": "Authorization", "api-key": ALLOWED})
    with pytest.raises(openai.RateLimitError) as caught:
        await sneaky.chat.completions.create(**CHAT)
    assert caught.value.response.headers["x-runguard-trip"] == "retry_cascade"
    assert len(upstream.received) == 2
    await eventually(lambda: len(requests_of(sink)) == 3)
    assert {r.key_hash for r in requests_of(sink)} == {HASH(ALLOWED)}


async def test_the_record_names_the_key_that_went_upstream_and_no_other_is_sent(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = _script
    url = await make_proxy()
    client = _openai(url, ALLOWED, {"x-api-key": OTHER, "x-goog-api-key": OTHER, "Connection": "x-goog-api-key"})
    assert (await client.chat.completions.create(**CHAT)).choices[0].message.content == "ok"
    (received,) = upstream.received
    sent = {name.lower(): value for name, value in received.headers.items()}
    assert sent["authorization"] == f"Bearer {ALLOWED}"
    assert "x-api-key" not in sent and "x-goog-api-key" not in sent
    await eventually(lambda: len(requests_of(sink)) == 1)
    assert requests_of(sink)[0].key_hash == HASH(ALLOWED)


async def test_a_browser_realtime_key_in_the_subprotocols_is_judged_too(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    url = await make_proxy(runs={"key_allowlist": [HASH(ALLOWED)]})
    ws_url = url.replace("http", "ws") + "/v1/realtime?model=gpt-realtime"
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(
                ws_url,
                headers={"Authorization": f"Bearer {ALLOWED}"},
                protocols=("realtime", f"openai-insecure-api-key.{OTHER}"),
            )
        assert refused.value.status == 400
        with pytest.raises(aiohttp.WSServerHandshakeError) as denied:
            await http.ws_connect(ws_url, protocols=("realtime", f"openai-insecure-api-key.{OTHER}"))
        assert denied.value.status == 403
        async with http.ws_connect(ws_url, protocols=("realtime", f"openai-insecure-api-key.{ALLOWED}")) as socket:
            await socket.send_str("{}")
            assert (await socket.receive_str()) == "{}"
    assert len(upstream.handshakes) == 1


async def test_the_served_proxy_judges_the_key_it_sends(upstream: FakeUpstream, tmp_path: Path) -> None:
    """The hop-by-hop trick against `runguard-proxy serve`, with the allowlist in its config file."""
    upstream.script = _script
    config = tmp_path / "runguard.yaml"
    settings = {
        "upstreams": {"openai": upstream.url, "gemini": upstream.url},
        "runs": {"key_salt": "test-salt", "key_allowlist": [HASH(ALLOWED)]},
        "store": {"database_url": ""},
    }
    config.write_text(yaml.safe_dump(settings))
    served = await start_serve({"RUNGUARD_HOME": str(tmp_path)}, tmp_path, "--config", str(config))
    try:
        client = _openai(served.url, ALLOWED, {"Connection": "Authorization", "x-goog-api-key": OTHER})
        with pytest.raises(openai.PermissionDeniedError):
            await client.chat.completions.create(**CHAT)
        gemini = _gemini(served.url, ALLOWED, {"Authorization": f"Bearer {OTHER}"})
        with pytest.raises(genai_errors.ClientError) as refused:
            await gemini.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
        assert refused.value.code == 400
        assert upstream.received == []
        good = _openai(served.url, ALLOWED, {})
        assert (await good.chat.completions.create(**CHAT)).choices[0].message.content == "ok"
    finally:
        await served.stop()
    assert ALLOWED not in served.text() and OTHER not in served.text()


@pytest.mark.parametrize(
    "query",
    [
        f"alt=json;key={OTHER}",
        f"alt=json;%24key={OTHER}",
        f"alt=sse&x=1;access_token={OTHER}",
        f"key={ALLOWED};oauth_token={OTHER}",
    ],
)
async def test_a_credential_after_a_semicolon_does_not_go_upstream_unjudged(
    upstream: FakeUpstream, make_proxy: ProxyFactory, query: str
) -> None:
    """`?alt=json;key=<unlisted key>` beside an allowed key: a server that splits queries on `;` would read a
    key the proxy never judged (it splits on `&`). Refused before anything goes upstream."""
    upstream.script = _script
    url = await make_proxy(runs={"key_allowlist": [HASH(ALLOWED)]})
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with aiohttp.ClientSession(headers={"x-goog-api-key": ALLOWED}) as session:
        target = yarl.URL(f"{url}{GEMINI_PATH}?{query}", encoded=True)
        async with session.post(target, json=body) as refused:
            assert refused.status == 400
            error = (await refused.json())["error"]
        assert error["status"] == "INVALID_ARGUMENT" and "follows a ';'" in error["message"]
        assert OTHER not in error["message"]
        assert upstream.received == []
        fine = yarl.URL(f"{url}{GEMINI_PATH}?alt=json;charset=utf-8", encoded=True)  # no credential after the ';'
        async with session.post(fine, json=body) as answered:
            assert answered.status == 200
    assert [r.query for r in upstream.received] == ["alt=json;charset=utf-8"]
