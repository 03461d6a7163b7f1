"""Nothing that looks like a guarded endpoint goes upstream unguarded (issue 33, item 4).

The attacks, against the real `serve` process: spellings of a guarded path
(`/v1//chat/completions`, dot segments, `;` parameters, escaped separators, a
Gemini action with a trailing `/`), sent on bare sockets because the SDKs
normalise them away, and bodies the proxy cannot read (a lone surrogate, which
google-genai sends as it is; nesting 1,100 levels deep), each while the run's
breaker is open. Before: every one of them reached the provider, unrecorded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.e2e import payloads
from tests.proxy.observe.test_metrics import samples, scrape, value
from tests.support.processes import ServeProcess
from tests.support.raw_http import request
from tests.support.served import serving
from tests.support.upstream import FakeUpstream, Received, Reply

pytestmark = pytest.mark.slow  # each test starts the serve process

CHAT = "/v1/chat/completions"
FLASH = "/v1beta/models/gemini-2.5-flash"
OPENAI_KEY = "sk-trust-paths"
GEMINI_KEY = "AIza-trust-paths"
CHAT_BODY = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
GEMINI_BODY = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
SURROGATE_CHAT = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"\\ud83d"}]}'
DEEP_CHAT = (
    b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"x":' + b"[" * 1100 + b"]" * 1100 + b"}"
)

Serve = Callable[..., AbstractAsyncContextManager[ServeProcess]]


def _answer(received: Received) -> Reply:
    if "generateContent" in received.path:
        return Reply.json(payloads.gemini_response("fine"))
    return Reply.json(payloads.chat_completion("fine"))


@pytest.fixture
def serve(upstream: FakeUpstream, tmp_path: Path) -> Serve:
    upstream.script = _answer

    def make(
        env: dict[str, str] | None = None, **sections: dict[str, Any]
    ) -> AbstractAsyncContextManager[ServeProcess]:
        return serving(upstream.url, tmp_path, env, **sections)

    return make


@pytest.fixture
async def served(serve: Serve) -> AsyncIterator[ServeProcess]:
    async with serve() as process:
        yield process


def _openai_headers(run: str | None, cap: int) -> dict[str, str]:
    named = {"X-Run-Id": run} if run else {}
    return {"Authorization": f"Bearer {OPENAI_KEY}", "X-RunGuard-Max-Requests": str(cap), **named}


def _gemini(url: str, run: str | None, cap: int) -> genai.Client:
    headers = {"X-RunGuard-Max-Requests": str(cap), **({"X-Run-Id": run} if run else {})}
    return genai.Client(api_key=GEMINI_KEY, http_options=types.HttpOptions(base_url=url, headers=headers))


NORMALISED = [
    "/v1//chat/completions",
    "//v1/chat/completions",
    "/v1/models/../chat/completions",
    "/v1/./chat/completions",
    "/v1/chat/completions/",
    "/v1/chat/%63ompletions",
    "/openai//v1/chat/completions",
]
REFUSED = [
    "/v1/chat/completions;x",
    "/v1/chat;x/completions",
    "/v1/chat%2fcompletions",
    "/v1/models/%2e%2e/chat/completions",
    "/v1/models/%2E%2E%2Fchat/completions",
    "/v1/chat/completions%3bx",
    "/v1\\chat\\completions",
]


async def test_every_spelling_of_a_guarded_openai_path_meets_the_run_s_open_breaker(
    served: ServeProcess, upstream: FakeUpstream
) -> None:
    run = "paths-openai"
    client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
    headers = {"X-Run-Id": run, "X-RunGuard-Max-Requests": "1"}
    await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
    )
    with pytest.raises(openai.RateLimitError):  # the cap trips: the run's breaker is open from here on
        await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
        )
    await client.close()
    for target in NORMALISED:
        reply = await request(served.url, "POST", target, CHAT_BODY, _openai_headers(run, 1))
        assert (target, reply.status, reply.headers.get("x-runguard-trip")) == (target, 429, "max_requests")
    for target in REFUSED:
        reply = await request(served.url, "POST", target, CHAT_BODY, _openai_headers(run, 1))
        assert (target, reply.status, reply.json()["error"]["code"]) == (target, 404, "unknown_path")
    assert len(upstream.received) == 1, [r.path for r in upstream.received]


async def test_a_gemini_action_with_a_trailing_slash_or_an_escaped_colon_is_the_action(
    served: ServeProcess, upstream: FakeUpstream
) -> None:
    run = "paths-gemini"
    client = _gemini(served.url, run, 1)
    await client.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    with pytest.raises(genai_errors.ClientError) as caught:
        await client.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert caught.value.code == 429
    headers = {"x-goog-api-key": GEMINI_KEY, "X-Run-Id": run, "Content-Type": "application/json"}
    for target in (f"{FLASH}:generateContent/", f"{FLASH}%3AgenerateContent", f"/gemini/{FLASH}:generateContent//"):
        reply = await request(served.url, "POST", target, GEMINI_BODY, headers)
        assert (target, reply.status, reply.json()["error"]["status"]) == (target, 429, "RESOURCE_EXHAUSTED")
    reply = await request(served.url, "POST", f"{FLASH}:generateContent;alt=sse", GEMINI_BODY, headers)
    assert (reply.status, reply.json()["error"]["status"]) == (404, "NOT_FOUND")  # Gemini's own shape
    assert len(upstream.received) == 1


async def test_the_path_sent_upstream_is_the_path_routed(served: ServeProcess, upstream: FakeUpstream) -> None:
    gemini = {"x-goog-api-key": GEMINI_KEY, "X-Run-Id": "routed"}
    for target, body, headers, sent in (
        ("/v1//chat/completions/", CHAT_BODY, _openai_headers("routed", 10), CHAT),
        ("/v1/models/../chat/completions?x=%2e", CHAT_BODY, _openai_headers("routed", 10), CHAT),
        (f"/gemini//{FLASH}:generateContent/", GEMINI_BODY, gemini, f"{FLASH}:generateContent"),
    ):
        reply = await request(served.url, "POST", target, body, headers)
        assert reply.status == 200
        assert reply.headers.get("x-runguard-run-id") == "routed"  # guarded: answered in its run
        assert upstream.received[-1].path == sent
    assert upstream.received[1].query == "x=."  # the query went on as it came (the fake upstream decodes it)


async def test_unreadable_bodies_count_toward_their_run_and_meet_its_breaker(
    served: ServeProcess, upstream: FakeUpstream
) -> None:
    # A lone surrogate, as google-genai sends it (JSON-escaped): the provider may read what orjson refuses.
    client = _gemini(served.url, "surrogates", 2)
    for _ in range(2):
        reply = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="\ud83d")
        assert reply.text == "fine"  # forwarded (guard.unreadable: forward)
    with pytest.raises(genai_errors.ClientError) as caught:
        await client.aio.models.generate_content(model="gemini-2.5-flash", contents="\ud83d")
    assert caught.value.code == 429  # counted toward its run: max_requests stops the third
    assert b"\\ud83d" in upstream.received[-1].body
    # Nested past the parser's depth, with no X-Run-Id: counted in its key's anonymous run.
    statuses = [(await request(served.url, "POST", CHAT, DEEP_CHAT, _openai_headers(None, 2))).status for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert len(upstream.received) == 4
    found = samples(await scrape(served.url))
    assert value(found, "runguard_unreadable_requests_total", provider="gemini", action="forward") == 2
    assert value(found, "runguard_unreadable_requests_total", provider="openai", action="forward") == 2
    assert value(found, "runguard_unreadable_requests_total", provider="gemini", action="blocked") == 1
    await served.stop()
    logged = [orjson.loads(line) for line in served.stdout if line.startswith(b'{"ts"')]
    errors = [line["error"] for line in logged]
    assert sum("unreadable request: invalid JSON: no low surrogate" in (e or "") for e in errors) == 3
    assert sum("unreadable request: invalid JSON: depth limit exceeded" in (e or "") for e in errors) == 3
    assert {line["run_id"] for line in logged if line["provider"] == "gemini"} == {"surrogates"}


async def test_unreadable_bodies_are_refused_when_the_operator_says_so(serve: Serve, upstream: FakeUpstream) -> None:
    async with serve(env={"RUNGUARD_GUARD__UNREADABLE": "refuse"}) as served:
        client = _gemini(served.url, "refused", 10)  # held: google-genai closes its session when the client goes
        with pytest.raises(genai_errors.ClientError) as caught:
            await client.aio.models.generate_content(model="gemini-2.5-flash", contents="\ud83d")
        assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")
        for body in (SURROGATE_CHAT, DEEP_CHAT):
            reply = await request(served.url, "POST", CHAT, body, _openai_headers("refused", 10))
            assert (reply.status, reply.json()["error"]["code"]) == (400, "unreadable_request")
        found = samples(await scrape(served.url))
    assert upstream.received == []
    assert value(found, "runguard_unreadable_requests_total", provider="openai", action="refuse") == 2
    assert value(found, "runguard_unreadable_requests_total", provider="gemini", action="refuse") == 1


LOOKALIKES = [
    "/v1/Chat/Completions",
    "/v1/CHAT/COMPLETIONS",
    "/v1/chat/completions%20",
    "/v1/chat/completions.",
    "/v1/Responses",
    "/openai/deployments/d/Chat/Completions?api-version=2024-10-21",
]


async def test_case_and_suffix_lookalikes_of_guarded_endpoints_are_refused_not_forwarded(
    served: ServeProcess, upstream: FakeUpstream
) -> None:
    """A front end that folds case or trims the path (Azure's often do) would serve these as the guarded
    endpoint; with the run's breaker open they must not go upstream as "other" routes."""
    run = "paths-lookalike"
    client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
    headers = {"X-Run-Id": run, "X-RunGuard-Max-Requests": "1"}
    await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
    )
    with pytest.raises(openai.RateLimitError):  # the run's breaker is open from here on
        await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
        )
    await client.close()
    for target in LOOKALIKES:
        reply = await request(served.url, "POST", target, CHAT_BODY, _openai_headers(run, 1))
        error = reply.json()["error"]
        assert (target, reply.status, error["code"]) == (target, 404, "unknown_path")
        assert "not spelt as the provider's endpoint is" in error["message"]
    gemini = {"x-goog-api-key": GEMINI_KEY, "X-Run-Id": run, "Content-Type": "application/json"}
    for target in (f"{FLASH}:GenerateContent", f"{FLASH}:streamgeneratecontent?alt=sse", f"{FLASH}:generateContent%20"):
        reply = await request(served.url, "POST", target, GEMINI_BODY, gemini)
        assert (target, reply.status, reply.json()["error"]["status"]) == (target, 404, "NOT_FOUND")  # Gemini's
    anthropic = {"x-api-key": "sk-ant-paths", "anthropic-version": "2023-06-01", "X-Run-Id": run}
    body = orjson.dumps(
        {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    )
    reply = await request(served.url, "POST", "/v1/Messages", body, anthropic)
    assert (reply.status, reply.json()["error"]["type"]) == (404, "not_found_error")  # Anthropic's own shape
    assert len(upstream.received) == 1, [r.path for r in upstream.received]
    # What is not a guarded endpoint in any case still goes upstream untouched.
    reply = await request(served.url, "GET", "/v1/models", b"", _openai_headers(None, 10))
    assert reply.status == 200 and upstream.received[-1].path == "/v1/models"
