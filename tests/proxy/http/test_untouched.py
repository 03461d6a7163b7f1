"""Requests RunGuard does not judge: forwarded as sent, relayed byte for byte, recorded as no request of a run;
a Responses poll is read only after the client has it.

The real proxy on loopback in front of the fake upstream, with aiohttp as the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import make_mocked_request

from runguard.proxy.http.untouched import polled
from runguard.proxy.providers.openai_responses.spec import SPEC as RESPONSES
from runguard.proxy.providers.routes import resolve
from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply, closed_port

HEADERS = {"Authorization": "Bearer sk-untouched"}


@pytest.fixture
async def proxy(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[str]:
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    yield running.url
    await running.stop()


def test_only_a_get_of_one_response_is_a_poll() -> None:
    for method, path, poll in [
        ("GET", "/v1/responses/resp_123", True),
        ("POST", "/v1/responses/resp_123", False),
        ("GET", "/v1/models", False),
        ("GET", "/v1/responses/resp_123/input_items", False),
    ]:
        route = resolve(path, False, False)
        assert route is not None
        assert polled(make_mocked_request(method, path), route) is (RESPONSES if poll else None), (method, path)
    anthropic = resolve("/v1/responses/resp_123", facts={"header:anthropic-version"})
    assert anthropic is not None and polled(make_mocked_request("GET", "/v1/responses/resp_123"), anthropic) is None


async def test_an_unmodelled_request_goes_upstream_as_sent_and_comes_back_as_answered(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    answer = b'{"object": "list", "data": [{"embedding": [0.1, 0.2]}]}  '
    upstream.script = lambda _: Reply(200, answer, {"Content-Type": "application/json", "X-Upstream": "yes"})
    body = b'{"model": "text-embedding-3-small", "input": "hello"}'
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy + "/v1/embeddings", data=body, headers=HEADERS) as response,
    ):
        assert (response.status, await response.read()) == (200, answer)
        assert response.headers["X-Upstream"] == "yes"
    (received,) = upstream.received
    assert received.body == body and received.path == "/v1/embeddings"
    assert not [r for r in sink.records if isinstance(r, RequestRecord)]


async def test_an_unmodelled_request_to_an_unreachable_upstream_gets_the_provider_s_error(sink: ListSink) -> None:
    running = await start_proxy(settings_for(f"http://127.0.0.1:{closed_port()}"), sink=sink)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(running.url + "/v1/models", headers=HEADERS) as response,
        ):
            assert response.status == 502
            assert "error" in orjson.loads(await response.read())
    finally:
        await running.stop()


async def test_a_poll_s_answer_reaches_the_client_byte_for_byte(
    proxy: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    answer = orjson.dumps(payloads.response_object("finished in the background")) + b"\n"
    upstream.script = lambda _: Reply(200, answer)
    async with (
        aiohttp.ClientSession() as session,
        session.get(proxy + "/v1/responses/resp_bg1", headers=HEADERS) as response,
    ):
        assert (response.status, await response.read()) == (200, answer)
    assert upstream.received[0].path == "/v1/responses/resp_bg1"
    assert not [r for r in sink.records if isinstance(r, RequestRecord)]  # nothing pending: nothing to account
