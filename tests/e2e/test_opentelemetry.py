"""OpenTelemetry export, end to end: real SDK clients through the real proxy, spans and metrics decoded by a
collector on loopback (`tests.support.otlp_receiver`, the official protobuf definitions).

Each test drives an agent (a hand-written loop over google-genai, openai over
gRPC with content, openai-agents, google-adk) against the scripted fake
upstream and checks what a tracing tool would show: GenAI spans and their
attributes, the tool calls rebuilt between model requests, agent turns and
trips as span events. What each telemetry module does on its own (spans,
trace ids, metrics, set-up and shutdown) is tested in tests/proxy/observe/telemetry/.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from google import genai
from google.genai import types

from tests.e2e import agents as loops
from tests.e2e.agents import sdk_model
from tests.e2e.test_multi_agent import adk_agent, adk_script, adk_session, ping_pong
from tests.support.otel import by_start, collecting, telemetry, trace_of
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.upstream import FakeUpstream

set_tracing_disabled(True)

AGENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
AGENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01"


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    async with collecting() as collector:
        yield collector


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
    assert {s.trace_id for s in receiver.spans} == {trace_of("otel-gemini", "test-key")}


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
