"""The proxy's own error answers look like the provider's: the SDKs raise their usual exceptions with the
proxy's message, and each provider gets its own error shape and status names."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import openai
import orjson
import pytest
from aiohttp import web
from google import genai
from google.genai import errors as genai_errors

from runguard.proxy.core.errors import UpstreamError, UpstreamTimeout
from runguard.proxy.core.events import Provider
from runguard.proxy.relay.replies import error_body, provider_error, upstream_failed

Answer = Callable[[], web.Response]


@pytest.fixture
async def answering() -> AsyncIterator[Callable[[Answer], str]]:
    """answering(answer) -> the URL of a loopback server that answers every request with `answer()`."""
    answer: list[Answer] = []

    async def handle(_: web.Request) -> web.Response:
        return answer[0]()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()

    def make(chosen: Answer) -> str:
        answer[:] = [chosen]
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield make
    await runner.cleanup()


def test_openai_and_unknown_providers_get_openai_s_error_object() -> None:
    for provider in (Provider.OPENAI, None):
        body = orjson.loads(error_body(provider, 413, "too large", "request_too_large"))
        error = {"message": "too large", "type": "runguard_proxy_error", "param": None, "code": "request_too_large"}
        assert body == {"error": error}


@pytest.mark.parametrize(
    ("status", "name"), [(404, "NOT_FOUND"), (429, "RESOURCE_EXHAUSTED"), (504, "DEADLINE_EXCEEDED"), (418, "UNKNOWN")]
)
def test_gemini_gets_its_error_object_with_the_status_name(status: int, name: str) -> None:
    body = orjson.loads(error_body(Provider.GEMINI, status, "no", "whatever"))
    assert body == {"error": {"code": status, "message": "no", "status": name}}


def test_a_timeout_is_a_504_and_any_other_upstream_failure_a_502() -> None:
    timed_out = upstream_failed(Provider.OPENAI, UpstreamTimeout("first byte after 60 s"))
    refused = upstream_failed(Provider.OPENAI, UpstreamError("connection refused"))
    assert (timed_out.status, refused.status) == (504, 502)
    assert timed_out.body is not None and refused.body is not None
    assert orjson.loads(timed_out.body)["error"]["code"] == "upstream_timeout"
    assert orjson.loads(refused.body)["error"]["code"] == "upstream_unreachable"
    assert "first byte after 60 s" in orjson.loads(timed_out.body)["error"]["message"]


def test_extra_headers_go_out_with_the_error() -> None:
    answer = provider_error(Provider.OPENAI, 429, "slow down", "rate_limited", headers={"Retry-After": "3"})
    assert (answer.status, answer.headers["Retry-After"], answer.content_type) == (429, "3", "application/json")


async def test_the_openai_sdk_raises_its_own_error_with_the_proxy_s_message(
    answering: Callable[[Answer], str],
) -> None:
    url = answering(lambda: upstream_failed(Provider.OPENAI, UpstreamError("connection refused")))
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as raised:
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 502
    assert raised.value.code == "upstream_unreachable"
    assert "connection refused" in raised.value.message


async def test_the_gemini_sdk_raises_its_own_error_with_the_status_name(answering: Callable[[Answer], str]) -> None:
    url = answering(lambda: provider_error(Provider.GEMINI, 404, "no such path", "not_found"))
    client = genai.Client(api_key="gm-test", http_options={"base_url": url})
    with pytest.raises(genai_errors.ClientError) as raised:
        await client.aio.models.generate_content(model="gemini-2.0-flash", contents="hi")
    assert (raised.value.code, raised.value.status, raised.value.message) == (404, "NOT_FOUND", "no such path")


def test_an_openai_error_has_openai_s_fields_and_runguard_s_code() -> None:
    body = orjson.loads(error_body(Provider.OPENAI, 413, "too large", "request_too_large"))
    assert body == {
        "error": {"message": "too large", "type": "runguard_proxy_error", "param": None, "code": "request_too_large"}
    }
    assert orjson.loads(error_body(None, 404, "no route", "unknown_path"))["error"]["code"] == "unknown_path"


def test_a_gemini_error_has_gemini_s_status_names() -> None:
    body = orjson.loads(error_body(Provider.GEMINI, 429, "slow down", "x"))
    assert body == {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
    assert orjson.loads(error_body(Provider.GEMINI, 418, "odd", "x"))["error"]["status"] == "UNKNOWN"


def test_a_provider_error_is_json_with_its_status_and_headers() -> None:
    reply = provider_error(Provider.OPENAI, 503, "stopping", "shutting_down", headers={"Retry-After": "1"})
    assert reply.status == 503 and reply.content_type == "application/json" and reply.headers["Retry-After"] == "1"


def test_an_upstream_that_times_out_is_a_504_and_one_that_cannot_be_reached_a_502() -> None:
    late = upstream_failed(Provider.OPENAI, UpstreamTimeout("no answer in 60 s"))
    down = upstream_failed(Provider.GEMINI, UpstreamError("connection refused"))
    assert (late.status, down.status) == (504, 502)
    assert late.body is not None and b"upstream_timeout" in late.body  # type: ignore[operator]
    assert down.body is not None and b"UNAVAILABLE" in down.body  # type: ignore[operator]
