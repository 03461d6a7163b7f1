"""The GenAI spans of real SDK traffic through the proxy, as a collector on loopback receives them: a run
without traceparent is one trace of agent turns, chat spans and tool spans rebuilt from the wire (a call
runs from the response that made it to the request that brings its result); a trip is a span event and
the blocked request an error span, its turn too. No content unless the operator opts in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.e2e import agents as loops
from tests.e2e import payloads
from tests.support.otel import by_start, telemetry, trace_of
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.upstream import FakeUpstream, Reply


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
    assert {s.trace_id for s in [*chats, *tools, turn]} == {
        trace_of("otel-chat", "sk-otel-chat")
    }  # from the tenant and run id
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


async def test_a_chat_span_names_the_upstream_it_was_sent_to_not_the_dialect_it_speaks(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    """Chat Completions go to three upstreams on one proxy: OpenAI's, an OpenAI-compatible service's and
    Gemini's OpenAI-compatible endpoint. Each chat span's `server.address`/`server.port` is where that
    request went (an operator reading a span of a slow call must see whose server it waited on)."""
    local, gemini = await FakeUpstream().start(), await FakeUpstream().start()
    try:
        for fake in (upstream, local, gemini):
            fake.script = lambda _: Reply.json(payloads.chat_completion("hi"))
        url = await make_proxy(
            upstreams={"gemini": gemini.url, "compatible": {"local": {"url": local.url}}},
            **telemetry(receiver.http_url),
        )
        bases = {"openai": f"{url}/v1", "local": f"{url}/local/v1", "gemini": f"{url}/v1beta/openai/"}
        for name, base in bases.items():
            async with openai.AsyncOpenAI(base_url=base, api_key=f"key-{name}", max_retries=0) as client:
                await client.chat.completions.create(
                    model=f"model-{name}",
                    messages=[{"role": "user", "content": "hi"}],
                    extra_headers={"X-Run-Id": name},
                )
        await receiver.wait_for(lambda r: len(r.named("chat ")) == 3)
    finally:
        await local.stop()
        await gemini.stop()

    servers = {
        s.attributes["gen_ai.request.model"]: (s.attributes["server.address"], s.attributes["server.port"])
        for s in receiver.named("chat ")
    }
    port = {
        name: int(fake.url.rsplit(":", 1)[1])
        for name, fake in (("openai", upstream), ("local", local), ("gemini", gemini))
    }
    assert servers == {f"model-{name}": ("127.0.0.1", port[name]) for name in bases}
    assert len(set(port.values())) == 3  # three servers, so a span naming the wrong one would show
