"""WebSockets through the proxy: relayed both ways, and the Responses API over a socket guarded request by request.

Clients: openai-agents' websocket transport (`OpenAIResponsesWSModel`), the
openai SDK's `client.responses.connect()`, and aiohttp's client for the
sockets RunGuard only relays (the Realtime API, Gemini's Live API). The fake
upstream answers its sockets from a script.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from typing import Any

import aiohttp
import openai
import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesWSModel, ResponsesWebSocketError

from tests.conftest import ProxyFactory, SdkClient
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.proxy.state.support import delete_prefix
from tests.services import require_redis, unique_name
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

set_tracing_disabled(True)


@function_tool
def order_status(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id}: packed, not shipped"


def agent_model(looping: bool = False) -> Any:
    """The model behind the socket: looks the order up, then answers (or, `looping`, looks it up forever)."""
    ids = itertools.count(1)

    def answer(message: str | bytes) -> Sequence[str]:
        create = json.loads(message)
        assert create["type"] == "response.create"
        n = next(ids)
        results = [i for i in create["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if results and not looping:
            response = payloads.response_object("Order A-1 is packed and ships tomorrow.")
        else:
            call = (f"call_{n}", "order_status", '{"order_id": "A-1"}')
            response = payloads.response_object(calls=[call])
        response["id"] = f"resp_ws_{n}"
        return [json.dumps(event) for event in payloads.responses_events(response)]

    return answer


def support_agent(client: openai.AsyncOpenAI) -> Agent[Any]:
    model = OpenAIResponsesWSModel("gpt-4o", client)
    return Agent(name="support", instructions="You answer questions about orders.", tools=[order_status], model=model)


async def test_an_openai_agents_run_over_a_websocket_goes_through_and_is_recorded(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.socket_script = agent_model()
    client = sdk_client(await make_proxy(), "sk-socket", {"X-Run-Id": "ws-run-1"})
    result = await Runner.run(support_agent(client), "Where is my order A-1?")
    assert result.final_output == "Order A-1 is packed and ships tomorrow."
    await eventually(lambda: len(requests_of(sink)) == 2)
    records = requests_of(sink)
    assert [(r.run_id, r.index, r.api, r.streamed, r.status) for r in records] == [
        ("ws-run-1", 1, "responses", True, 200),
        ("ws-run-1", 2, "responses", True, 200),
    ]
    assert [r.tool_calls for r in records] == [("order_status",), ()]
    assert all((r.input_tokens, r.output_tokens) == (20, 6) and r.usd > 0 for r in records)
    (handshake,) = upstream.handshakes
    assert handshake.path == "/v1/responses"
    assert handshake.headers["Authorization"] == "Bearer sk-socket"
    assert "X-Run-Id" not in handshake.headers
    assert len(upstream.socket_received) == 2


async def test_a_looping_agent_over_a_websocket_is_stopped_on_its_socket(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.socket_script = agent_model(looping=True)
    url = await make_proxy(guard={"detectors": {"max_requests": {"limit": 3}}})
    client = sdk_client(url, "sk-socket", {"X-Run-Id": "ws-loop"})
    with pytest.raises(ResponsesWebSocketError) as caught:
        await Runner.run(support_agent(client), "Where is my order A-1?", max_turns=20)
    assert caught.value.code == "runguard_max_requests"
    assert caught.value.payload["status"] == 429
    assert "max_requests" in (caught.value.error_message or "")
    assert len(upstream.socket_received) == 3  # the 4th request was answered by the proxy
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert [r.blocked_by for r in requests_of(sink)] == [None, None, None, "max_requests"]
    assert "max_requests" in [t.detector for t in trips_of(sink) if t.action == "block"]


async def test_a_stop_on_a_socket_answers_its_client_family_as_over_http(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream
) -> None:
    """The Codex CLI names itself in the handshake (`originator: codex_exec`); with `response: auto` a block
    answers it with `refuse` (a 400, whose body it prints) on its socket as over HTTP, not the 429 other
    clients get; `guard.client_answers` changes it here too."""
    upstream.socket_script = agent_model(looping=True)
    default = await make_proxy(guard={"detectors": {"max_requests": {"limit": 1}}})
    configured = await make_proxy(
        guard={"detectors": {"max_requests": {"limit": 1}}, "client_answers": {"codex": "error"}}
    )
    statuses = {}
    for name, url in (("default", default), ("configured", configured)):
        client = sdk_client(url, "sk-socket", {"X-Run-Id": f"ws-codex-{name}", "originator": "codex_exec"})
        with pytest.raises(ResponsesWebSocketError) as caught:
            await Runner.run(support_agent(client), "Where is my order A-1?", max_turns=20)
        assert caught.value.code == "runguard_max_requests"
        statuses[name] = caught.value.payload["status"]
    assert statuses == {"default": 400, "configured": 429}


@pytest.mark.redis
async def test_a_looping_agent_over_a_websocket_is_stopped_with_its_run_state_on_redis(
    upstream: FakeUpstream, sink: ListSink, sdk_client: SdkClient
) -> None:
    """The same loop with the shared state a fleet of replicas uses: each request's admission waits on
    Redis while the socket relays."""
    url, prefix = require_redis(), unique_name("rgtest_ws")
    upstream.socket_script = agent_model(looping=True)
    state = {"url": url, "key_prefix": prefix}
    running = await start_proxy(
        settings_for(upstream.url, state=state, guard={"detectors": {"max_requests": {"limit": 3}}}), sink=sink
    )
    try:
        client = sdk_client(running.url, "sk-socket", {"X-Run-Id": "ws-loop-redis"})
        with pytest.raises(ResponsesWebSocketError) as caught:
            await Runner.run(support_agent(client), "Where is my order A-1?", max_turns=20)
    finally:
        await running.stop()
        await delete_prefix(url, prefix)
    assert caught.value.code == "runguard_max_requests"
    assert len(upstream.socket_received) == 3
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert [r.blocked_by for r in requests_of(sink)] == [None, None, None, "max_requests"]


async def test_the_openai_sdk_s_responses_socket_gets_a_stop_completion_in_place_of_a_stopped_request(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream, sink: ListSink
) -> None:

    def model(message: str | bytes) -> Sequence[str]:
        lane = json.loads(message)["stream_id"]  # echoed on every event of the response, as the API does
        return [json.dumps({**e, "stream_id": lane}) for e in payloads.responses_events(payloads.response_object())]

    upstream.socket_script = model
    url = await make_proxy(guard={"detectors": {"max_requests": {"limit": 1, "response": "stop"}}})
    client = sdk_client(url, "sk-socket", {"X-Run-Id": "ws-sdk"})
    texts = []
    async with client.responses.connect() as connection:
        for _ in range(2):
            await connection.response.create(model="gpt-4o", input="Say hi", stream_id="lane-a")
            async for event in connection:
                if event.type == "response.completed":
                    assert event.stream_id == "lane-a"
                    texts.append(event.response.output_text)
                    break
    assert texts[0] == "Hi from responses"
    assert "max_requests" in texts[1]
    assert len(upstream.socket_received) == 1
    await eventually(lambda: len(requests_of(sink)) == 2)
    assert [r.blocked_by for r in requests_of(sink)] == [None, "max_requests"]


async def test_a_compatible_service_s_responses_socket_is_its_own_priced_by_its_table(
    upstream: FakeUpstream, sink: ListSink, sdk_client: SdkClient
) -> None:
    """A socket opened under a compatible service's prefix goes to that service, and its requests are recorded
    as the service's and priced by its table, as its HTTP requests are (OpenAI's tables do not know its model)."""
    local = await FakeUpstream().start()
    answer = {**payloads.response_object(), "model": "local-coder"}
    local.socket_script = lambda _: [json.dumps(e) for e in payloads.responses_events(answer)]
    prices = {"local-coder": {"input": 1000.0, "output": 1000.0}}  # USD per 1M tokens
    running = await start_proxy(
        settings_for(upstream.url, upstreams={"compatible": {"local": {"url": local.url, "prices": prices}}}),
        sink=sink,
    )
    try:
        client = sdk_client(f"{running.url}/local", "sk-local", {"X-Run-Id": "ws-local"})
        async with client.responses.connect() as connection:
            await connection.response.create(model="local-coder", input="Say hi")
            async for event in connection:
                if event.type == "response.completed":
                    break
    finally:
        await running.stop()
        await local.stop()
    assert len(local.socket_received) == 1 and not upstream.socket_received
    await eventually(lambda: len(requests_of(sink)) == 1)
    (record,) = requests_of(sink)
    assert (record.provider, record.model, record.unpriced) == ("local", "local-coder", False)
    assert record.usd == pytest.approx((20 + 6) * 1000.0 / 1e6)


async def test_a_realtime_socket_is_relayed_both_ways_with_its_subprotocol_and_close_code(
    proxy_url: str, upstream: FakeUpstream
) -> None:
    def realtime(message: str | bytes) -> Sequence[str | bytes | int]:
        if message == "bye":
            return [4001]
        return [message[::-1]]

    upstream.socket_script = realtime
    headers = {"Authorization": "Bearer sk-voice", "X-Run-Id": "call-7", "OpenAI-Beta": "realtime=v1"}
    async with aiohttp.ClientSession() as session:
        url = f"{proxy_url}/v1/realtime?model=gpt-realtime"
        async with session.ws_connect(url, headers=headers, protocols=("realtime",)) as socket:
            assert socket.protocol == "realtime"
            await socket.send_str('{"type": "session.update"}')
            assert await socket.receive_str() == '}"etadpu.noisses" :"epyt"{'
            await socket.send_bytes(b"\x00\x01audio")
            assert await socket.receive_bytes() == b"oidua\x01\x00"
            await socket.send_str("bye")
            closing = await socket.receive()
            assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 4001
    (handshake,) = upstream.handshakes
    assert (handshake.path, handshake.query) == ("/v1/realtime", "model=gpt-realtime")
    assert handshake.headers["Authorization"] == "Bearer sk-voice"
    assert handshake.headers["OpenAI-Beta"] == "realtime=v1"
    assert "X-Run-Id" not in handshake.headers
    assert upstream.socket_received == ['{"type": "session.update"}', b"\x00\x01audio", "bye"]


async def test_gemini_live_sockets_are_relayed_with_their_key(proxy_url: str, upstream: FakeUpstream) -> None:
    """Gemini's Live API path, as a client on plain ws:// sends it (google-genai itself always dials wss://, so it
    reaches the proxy only through a TLS terminator in front of it)."""
    path = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    url = f"{proxy_url}{path}?key=gemini-live-key"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as socket:
        await socket.send_str('{"setup": {"model": "models/gemini-live"}}')
        assert await socket.receive_str() == '{"setup": {"model": "models/gemini-live"}}'
    (handshake,) = upstream.handshakes
    assert (handshake.path, handshake.query) == (path, "key=gemini-live-key")


async def test_a_key_stopped_by_its_daily_budget_cannot_open_a_live_session(
    make_proxy: ProxyFactory, upstream: FakeUpstream
) -> None:
    """A Live session is relayed unread, so nothing in it is judged: a key whose daily budget is spent is
    refused at the handshake (the provider's 429 with the reason), as its other unread requests are, and
    nothing reaches the provider. Another key still connects."""
    upstream.script = lambda _: Reply.json(payloads.gemini_response())
    url = await make_proxy(guard={"detectors": {"budget": {"key_daily_usd": 0.000001}}})  # one answer spends it
    model = "/v1beta/models/gemini-2.5-flash:generateContent"
    live = f"{url}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    contents = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}{model}?key=spent-live-key", json=contents) as spent:
            assert spent.status == 200
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(f"{live}?key=spent-live-key")
        assert caught.value.status == 429
        assert not upstream.handshakes
        async with session.ws_connect(f"{live}?key=other-live-key") as socket:
            await socket.send_str('{"setup": {}}')
            assert await socket.receive_str() == '{"setup": {}}'
    assert [h.query for h in upstream.handshakes] == ["key=other-live-key"]


async def test_a_refused_handshake_reaches_the_client_with_the_provider_s_status(
    proxy_url: str, upstream: FakeUpstream
) -> None:
    upstream.socket_refusal = 401
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(f"{proxy_url}/v1/realtime?model=gpt-realtime")
    assert caught.value.status == 401


async def test_a_response_cut_off_by_the_client_leaving_is_recorded_as_such(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    response = payloads.response_object()
    upstream.socket_script = lambda _: [json.dumps(payloads.responses_events(response)[0])]  # created, then nothing
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": "Bearer sk-socket", "X-Run-Id": "ws-cut"}
        async with session.ws_connect(f"{proxy_url}/v1/responses", headers=headers) as socket:
            await socket.send_json({"type": "response.create", "model": "gpt-4o", "input": "Write a long essay"})
            assert (await socket.receive_json())["type"] == "response.created"
    await eventually(lambda: len(requests_of(sink)) == 1)
    (record,) = requests_of(sink)
    assert (record.run_id, record.status, record.error) == ("ws-cut", None, "client_disconnected")


async def test_a_provider_closing_a_socket_mid_answer_is_recorded_as_its_failure(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    response = payloads.response_object()
    created = json.dumps(payloads.responses_events(response)[0])
    upstream.socket_script = lambda _: [created, 1011]  # created, then the provider closes (internal error)
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": "Bearer sk-socket", "X-Run-Id": "ws-upstream-cut"}
        async with session.ws_connect(f"{proxy_url}/v1/responses", headers=headers) as socket:
            await socket.send_json({"type": "response.create", "model": "gpt-4o", "input": "Write a long essay"})
            assert (await socket.receive_json())["type"] == "response.created"
            closing = await socket.receive()
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 1011  # the provider's code, passed on
    await eventually(lambda: len(requests_of(sink)) == 1)
    (record,) = requests_of(sink)
    assert (record.run_id, record.status, record.error) == ("ws-upstream-cut", None, "upstream_closed")


async def test_open_sockets_are_closed_as_going_away_when_the_proxy_stops(upstream: FakeUpstream) -> None:
    running = await start_proxy(settings_for(upstream.url))
    url = f"{running.url}/v1/realtime?model=gpt-realtime"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as socket:
        await socket.send_str("ping?")
        assert await socket.receive_str() == "ping?"
        stopping = asyncio.ensure_future(running.stop())
        closing = await socket.receive()
        await stopping
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == aiohttp.WSCloseCode.GOING_AWAY
