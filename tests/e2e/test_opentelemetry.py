"""OpenTelemetry export, end to end: real SDK clients through the real proxy, spans and metrics decoded by a
collector on loopback (`tests.support.otlp_receiver`, the official protobuf definitions).

Each test drives an agent (a hand-written loop over openai or google-genai,
openai-agents, google-adk) against the scripted fake upstream and checks what
a tracing tool would show: GenAI spans and their attributes, the tool calls
rebuilt between model requests, which trace they join (the agent's own
`traceparent`, or the run's), trips as span events, and the GenAI metrics.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from agents import Agent, Runner, function_tool, set_tracing_disabled
from google import genai
from google.genai import types

from runguard.proxy.observe.telemetry.ids import run_trace_id
from runguard.proxy.observe.telemetry.meters import DURATION_BUCKETS, TOKEN_BUCKETS
from tests.e2e import agents as loops
from tests.e2e.agents import sdk_model
from tests.e2e.test_multi_agent import adk_agent, adk_script, adk_session, ping_pong
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, hung_collector
from tests.support.processes import start_serve
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream

set_tracing_disabled(True)

AGENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
AGENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01"


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    collector = OtlpReceiver()
    await collector.start_http()
    await collector.start_grpc()
    yield collector
    await collector.stop()


def telemetry(endpoint: str, **more: Any) -> dict[str, Any]:
    """Export to `endpoint`, with metrics and idle agent turns flushed fast enough for a test."""
    quick = {"metric_interval_seconds": 0.2, "agent_turn_idle_seconds": 0.5, "export_timeout_seconds": 2}
    return {"telemetry": {"endpoint": endpoint, **quick, **more}}


def trace_of(run_id: str) -> str:
    return f"{run_trace_id(run_id):032x}"


def by_start(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return sorted(spans, key=lambda s: s.start_ns)


async def test_chat_agent_run_is_one_trace_with_agent_turn_chat_and_tool_spans(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    upstream.script = loops.chat_script(steps=2)
    url = await make_proxy(**telemetry(receiver.http_url))
    client = sdk_client(url, "sk-otel-chat", {"X-Run-Id": "otel-chat"})
    assert await loops.chat_agent(client, loops.progressing_tool) == "Done."
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 3 and len(r.named("execute_tool")) == 2)
    await receiver.wait_for(lambda r: len(r.named("invoke_agent")) == 1)  # ended when its agent fell silent

    chats = by_start(receiver.named("chat "))
    tools = by_start(receiver.named("execute_tool"))
    (turn,) = receiver.named("invoke_agent")
    assert {s.trace_id for s in [*chats, *tools, turn]} == {trace_of("otel-chat")}  # derived from the run id
    assert turn.parent_span_id == "" and turn.kind == "INTERNAL"
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.conversation.id"] == "otel-chat"
    assert all(s.parent_span_id == turn.span_id for s in [*chats, *tools])
    assert turn.start_ns <= chats[0].start_ns and turn.end_ns >= chats[-1].end_ns

    first = chats[0]
    assert first.name == "chat gpt-4o-mini" and first.kind == "CLIENT"
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert first.attributes["gen_ai.response.model"] == "gpt-4o-mini"
    assert first.attributes["gen_ai.usage.input_tokens"] == 50
    assert first.attributes["gen_ai.usage.output_tokens"] == 10
    assert first.attributes["gen_ai.conversation.id"] == "otel-chat"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chats[-1].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert first.attributes["runguard.request.index"] == 1 and first.attributes["runguard.cost.usd"] > 0
    assert first.status == "UNSET" and "error.type" not in first.attributes
    assert first.resource["service.name"] == "runguard-proxy"
    upstream_port = int(upstream.url.rsplit(":", 1)[1])
    assert (first.attributes["server.address"], first.attributes["server.port"]) == ("127.0.0.1", upstream_port)

    # Each call runs from the end of the response that made it to the request that brings its result.
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ["call_0", "call_1"]
    for k, tool in enumerate(tools):
        assert tool.name == "execute_tool parse_document"
        assert tool.attributes["gen_ai.tool.name"] == "parse_document"
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.start_ns == chats[k].end_ns and tool.end_ns <= chats[k + 1].start_ns + 1_000_000
    # No content unless the operator opts in.
    every = [a for s in receiver.spans for a in s.attributes]
    assert not {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"} & set(every)


async def test_a_request_with_traceparent_joins_the_agents_trace(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    upstream.script = loops.chat_script(steps=1)
    url = await make_proxy(**telemetry(receiver.http_url))
    headers = {"X-Run-Id": "otel-joined", "traceparent": TRACEPARENT, "tracestate": "vendor=1"}
    client = sdk_client(url, "sk-otel-joined", headers)
    await loops.chat_agent(client, loops.progressing_tool)
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 2 and len(r.named("execute_tool")) == 1)
    spans = [*receiver.named("chat "), *receiver.named("execute_tool")]
    assert {(s.trace_id, s.parent_span_id) for s in spans} == {(AGENT_TRACE, AGENT_SPAN)}
    assert not receiver.named("invoke_agent")  # the agent's own tracing shows its turns
    assert upstream.received[0].headers["traceparent"] == TRACEPARENT  # forwarded untouched


async def test_a_trip_is_a_span_event_and_the_blocked_request_an_error_span(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    upstream.script = loops.chat_script(steps=20)
    url = await make_proxy(**telemetry(receiver.http_url))
    client = sdk_client(url, "sk-otel-trip", {"X-Run-Id": "otel-trip"})
    with pytest.raises(openai.RateLimitError):
        await loops.chat_agent(client, loops.soft_error_tool)
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 4)
    chats = by_start(receiver.named("chat "))
    assert [c.status for c in chats] == ["UNSET"] * 3 + ["ERROR"]
    blocked = chats[-1]
    assert blocked.attributes["error.type"] == "runguard.blocked"
    assert blocked.attributes["runguard.blocked_by"] == "non_progress"
    assert "non_progress" in blocked.status_message and "3 times" in blocked.status_message
    (event,) = [e for e in blocked.events if e.name == "runguard.trip"]
    assert event.attributes["runguard.detector"] == "non_progress"
    assert event.attributes["runguard.action"] == "block"
    assert "3 times" in event.attributes["runguard.reason"]
    await receiver.wait_for(lambda r: bool(r.named("invoke_agent")))
    assert receiver.named("invoke_agent")[0].status == "ERROR"


async def test_gemini_generate_content_spans_and_tool_spans_by_name(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    upstream.script = loops.gemini_script(steps=2)
    url = await make_proxy(**telemetry(receiver.http_url))
    options = types.HttpOptions(base_url=url, headers={"X-Run-Id": "otel-gemini"})
    client = genai.Client(api_key="test-key", http_options=options)
    await loops.gemini_agent(client, loops.progressing_tool)
    await receiver.wait_for(lambda r: len(r.named("generate_content")) == 3 and len(r.named("execute_tool")) == 2)
    calls = by_start(receiver.named("generate_content"))
    assert calls[0].name == "generate_content gemini-2.5-flash"
    assert calls[0].attributes["gen_ai.operation.name"] == "generate_content"
    assert calls[0].attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert calls[0].attributes["gen_ai.usage.input_tokens"] == 7
    tools = by_start(receiver.named("execute_tool"))
    assert [t.attributes["gen_ai.tool.name"] for t in tools] == ["parse_document"] * 2
    assert tools[0].start_ns == calls[0].end_ns  # found by name: Gemini's calls carry no ids
    assert {s.trace_id for s in receiver.spans} == {trace_of("otel-gemini")}


async def test_grpc_export_with_headers_service_name_and_content_opt_in(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    upstream.script = loops.chat_script(steps=1)
    more = {"protocol": "grpc", "headers": {"authorization": "Bearer otel-t"}, "service_name": "edge-guard"}
    url = await make_proxy(**telemetry(receiver.grpc_url, capture_content=True, **more))
    client = sdk_client(url, "sk-otel-grpc", {"X-Run-Id": "otel-grpc"})
    await loops.chat_agent(client, loops.progressing_tool)
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 2 and len(r.named("execute_tool")) == 1)
    assert any(h.get("authorization") == "Bearer otel-t" for h in receiver.headers)
    first, second = by_start(receiver.named("chat "))
    assert first.resource["service.name"] == "edge-guard"
    (output,) = json.loads(first.attributes["gen_ai.output.messages"])
    assert output["role"] == "assistant" and output["parts"][0]["type"] == "tool_call"
    assert output["parts"][0]["name"] == "parse_document" and output["parts"][0]["id"] == "call_0"
    (given,) = json.loads(second.attributes["gen_ai.input.messages"])
    assert given["parts"][0]["id"] == "call_0" and "running" in given["parts"][0]["response"]
    (tool,) = receiver.named("execute_tool")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"])["attempt"] == 0
    assert json.loads(tool.attributes["gen_ai.tool.call.result"]) == {"status": "running", "progress": 0}


async def test_genai_metrics_are_histograms_with_the_conventions_buckets(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    upstream.script = loops.chat_script(steps=1)
    url = await make_proxy(**telemetry(receiver.http_url))
    await loops.chat_agent(sdk_client(url, "sk-otel-metrics", {"X-Run-Id": "otel-metrics"}), loops.progressing_tool)

    def counted(r: OtlpReceiver) -> bool:
        usage = r.metrics.get("gen_ai.client.token.usage")
        return usage is not None and sum(p.count for p in usage.points) == 4  # 2 requests x input, output

    await receiver.wait_for(counted)
    usage = receiver.metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    kinds = {p.attributes["gen_ai.token.type"]: p for p in usage.points}
    assert kinds["input"].total == 100 and kinds["output"].total == 20
    assert kinds["input"].bounds == tuple(float(b) for b in TOKEN_BUCKETS)
    assert kinds["input"].attributes["gen_ai.operation.name"] == "chat"
    assert kinds["input"].attributes["gen_ai.provider.name"] == "openai"
    assert kinds["input"].attributes["gen_ai.request.model"] == "gpt-4o-mini"
    duration = receiver.metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s" and sum(p.count for p in duration.points) == 2
    assert duration.points[0].bounds == DURATION_BUCKETS


async def test_openai_agents_run_spans(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    upstream.script = loops.chat_script(steps=1)
    # One agent's two requests are one turn: an idle time a loaded machine's tool round trip stays under.
    url = await make_proxy(**telemetry(receiver.http_url, agent_turn_idle_seconds=3))
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-otel-agents", default_headers={"X-Run-Id": "oa"})

    @function_tool
    def parse_document(document: str, approach: str, attempt: int) -> str:
        """Parse a document."""
        return loops.progressing_tool("parse_document", {"attempt": attempt})

    agent = Agent(name="Extractor", instructions="Use parse_document.", tools=[parse_document])
    agent.model = sdk_model("chat", client, "gpt-4o-mini")
    result = await Runner.run(agent, "Extract the invoice total.", max_turns=5)
    assert result.final_output == "Done."
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 2 and len(r.named("invoke_agent")) == 1)
    (tool,) = receiver.named("execute_tool")
    assert tool.attributes["gen_ai.tool.call.id"] == "call_0"
    (turn,) = receiver.named("invoke_agent")
    assert {s.parent_span_id for s in [*receiver.named("chat "), tool]} == {turn.span_id}


@pytest.mark.usefixtures("google_key")
async def test_adk_agents_handing_over_are_turns_and_the_cycle_trip_an_event(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    upstream.script = adk_script(upstream, ping_pong)
    url = await make_proxy(**telemetry(receiver.http_url))
    triage = adk_agent(url, "otel-adk", "triage", [adk_agent(url, "otel-adk", "billing")])
    with pytest.raises(genai.errors.ClientError):
        await adk_session(triage, "Where is my refund?")
    calls = len(upstream.received) + 1  # and the request answered by RunGuard
    await receiver.wait_for(lambda r: len(r.named("generate_content")) == calls)
    await receiver.wait_for(lambda r: len(r.named("invoke_agent")) == calls)
    turns = by_start(receiver.named("invoke_agent"))
    assert [t.name for t in turns[:3]] == ["invoke_agent triage", "invoke_agent billing", "invoke_agent triage"]
    assert turns[-1].status == "ERROR"
    chats = by_start(receiver.named("generate_content"))
    assert [c.parent_span_id for c in chats] == [t.span_id for t in turns]  # one request per turn here
    trips = [e for c in chats for e in c.events if e.name == "runguard.trip"]
    assert [e.attributes["runguard.detector"] for e in trips] == ["handoff_cycle"]


@pytest.fixture
def google_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")


async def test_a_run_served_by_two_replicas_is_one_trace(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    """Two proxies that share nothing put a run's spans in one trace: its id is derived from the run id."""
    upstream.script = loops.chat_script(steps=3)
    urls = [await make_proxy(**telemetry(receiver.http_url)) for _ in range(2)]
    clients = [sdk_client(url, "sk-otel-replicas", {"X-Run-Id": "otel-replicas"}) for url in urls]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Extract the invoice total."}]
    for step in range(4):
        completion = await clients[step % 2].chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        message = completion.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        messages += [{"role": "tool", "tool_call_id": c.id, "content": "{}"} for c in message.tool_calls]
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 4 and len(r.named("invoke_agent")) == 2)
    assert {s.trace_id for s in receiver.spans} == {trace_of("otel-replicas")}
    turns = {s.span_id for s in receiver.named("invoke_agent")}  # a turn per replica that served the agent
    assert {s.parent_span_id for s in receiver.named("chat ")} == turns
    # A call answered on the other replica: its span is timed at the result (the call was seen elsewhere).
    tools = receiver.named("execute_tool")
    assert len(tools) == 3 and all(t.attributes["runguard.tool.call_seen"] is False for t in tools)


@pytest.mark.slow
async def test_serve_exports_with_the_standard_otel_variables(
    receiver: OtlpReceiver, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = loops.chat_script(steps=1)
    config = tmp_path / "runguard.yaml"
    config.write_text(yaml.safe_dump(settings_for(upstream.url).model_dump(mode="json", include={"upstreams"})))
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=team%20a",
        "OTEL_SERVICE_NAME": "guard-sidecar",
        "RUNGUARD_DATABASE_URL": "",
    }
    served = await start_serve(env, tmp_path, "--config", str(config))
    try:
        client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-otel-serve", max_retries=0)
        await loops.chat_agent(client, loops.progressing_tool)
        await client.close()
        await receiver.wait_for(lambda r: len(r.named("chat ")) == 2)
    finally:
        await served.stop()
    assert {s.resource["service.name"] for s in receiver.spans} == {"guard-sidecar"}
    assert any(h.get("x-tenant") == "team a" for h in receiver.headers)
    await receiver.wait_for(lambda r: len(r.named("invoke_agent")) == 1)  # the open turn ended at shutdown


@pytest.mark.slow
async def test_serve_with_otel_sdk_disabled_exports_nothing(
    receiver: OtlpReceiver, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = loops.chat_script(steps=1)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_url,
        "OTEL_SDK_DISABLED": "true",
        "RUNGUARD_OPENAI_UPSTREAM": upstream.url,
        "RUNGUARD_DATABASE_URL": "",
    }
    served = await start_serve(env, tmp_path)
    try:
        client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-otel-off", max_retries=0)
        await loops.chat_agent(client, loops.progressing_tool)
        await client.close()
        async with httpx.AsyncClient() as http:
            scraped = (await http.get(served.url + "/runguard/metrics")).text
    finally:
        await served.stop()  # a shutdown flushes whatever was queued
    assert "runguard_requests_total" in scraped and "runguard_otel_spans" not in scraped  # no exporter was built
    assert receiver.exports == 0


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
async def test_a_collector_that_never_answers_costs_requests_nothing_and_shutdown_gives_up_on_it(
    upstream: FakeUpstream, sdk_client: Any, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    hung, endpoint = await hung_collector()
    upstream.script = loops.chat_script(steps=3)
    more = {"protocol": protocol, "max_queue_size": 3, "export_timeout_seconds": 1}
    proxy = await start_proxy(settings_for(upstream.url, **telemetry(endpoint, **more)))
    try:
        client = sdk_client(proxy.url, "sk-otel-hung", {"X-Run-Id": "otel-hung"})
        for _ in range(3):  # 12 requests, 9 tool results: more spans than the queue holds
            assert await loops.chat_agent(client, loops.progressing_tool) == "Done."
        async with httpx.AsyncClient() as http:
            scraped = (await http.get(proxy.url + "/runguard/metrics")).text
    finally:
        await proxy.stop()
        hung.close()
    dropped = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith("runguard_otel_spans_dropped_total")
    }
    assert dropped["queue_full"] > 0  # the queue stayed bounded while the collector hung
    assert "stopping without" in caplog.text  # the shutdown waited one export timeout, then left
