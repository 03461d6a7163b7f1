"""Which trace a request's spans join: the agent's own (`traceparent`), else its run's, whose id is derived
from the tenant and the run id, so replicas that share nothing put a run's spans in one trace, and two tenants
sending one run id get two."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import get_current_span

from runguard.proxy.observe.telemetry.ids import RunTraceIds, agent_context, run_trace_id
from runguard.proxy.runs.keys import KeyHasher
from tests.e2e import agents as loops
from tests.e2e import payloads
from tests.support.otel import telemetry, trace_of
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.proxy import TEST_SALT
from tests.support.upstream import FakeUpstream, Reply

HASH = KeyHasher(TEST_SALT.encode()).hash

AGENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
AGENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01"


def test_a_run_s_trace_id_is_128_bits_never_zero_and_its_own_in_its_tenant() -> None:
    assert run_trace_id("k_a", "run-1") == run_trace_id("k_a", "run-1") != run_trace_id("k_a", "run-2")
    assert run_trace_id("k_a", "run-1") != run_trace_id("k_b", "run-1")  # the same X-Run-Id of two tenants
    assert 0 < run_trace_id("k_a", "run-1") < 2**128
    assert run_trace_id("", "") != 0


def test_a_run_s_trace_id_is_the_same_in_another_process() -> None:
    code = "from runguard.proxy.observe.telemetry.ids import run_trace_id; print(run_trace_id('k_a', 'run-1'))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert int(other.stdout) == run_trace_id("k_a", "run-1")


def test_a_valid_traceparent_is_the_parent_with_its_tracestate() -> None:
    context = agent_context(TRACEPARENT, "vendor=1")
    assert context is not None
    parent = get_current_span(context).get_span_context()
    assert (parent.trace_id, parent.span_id, parent.is_remote) == (int(AGENT_TRACE, 16), int(AGENT_SPAN, 16), True)
    assert parent.trace_state.get("vendor") == "1"
    assert agent_context(TRACEPARENT, None) is not None


@pytest.mark.parametrize("traceparent", [None, "", "garbage", f"00-{'0' * 32}-{AGENT_SPAN}-01", "00-xyz-abc-01"])
def test_no_traceparent_or_one_that_does_not_parse_means_the_run_s_trace(traceparent: str | None) -> None:
    assert agent_context(traceparent, "vendor=1") is None


def test_the_chosen_trace_id_goes_to_the_root_span_being_started_and_random_ones_otherwise() -> None:
    ids = RunTraceIds()
    tracer = TracerProvider(id_generator=ids, shutdown_on_exit=False).get_tracer("test")
    assert ids.is_trace_id_random()
    ids.chosen = run_trace_id("k_a", "run-1")
    assert not ids.is_trace_id_random()
    root = tracer.start_span("invoke_agent planner")
    ids.chosen = None
    other = tracer.start_span("invoke_agent other")
    assert root.get_span_context().trace_id == run_trace_id("k_a", "run-1")
    assert other.get_span_context().trace_id not in (run_trace_id("k_a", "run-1"), 0)
    root.end()
    other.end()


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
    assert {s.trace_id for s in receiver.spans} == {trace_of("otel-replicas", "sk-otel-replicas")}
    turns = {s.span_id for s in receiver.named("invoke_agent")}  # a turn per replica that served the agent
    assert {s.parent_span_id for s in receiver.named("chat ")} == turns
    # A call answered on the other replica: its span is timed at the result (the call was seen elsewhere).
    tools = receiver.named("execute_tool")
    assert len(tools) == 3 and all(t.attributes["runguard.tool.call_seen"] is False for t in tools)


async def test_two_tenants_sending_the_same_run_id_get_two_traces(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    """The same `X-Run-Id` from two keys names two runs: neither tenant's spans join the other's trace, nor
    become children of the other's agent turn."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    url = await make_proxy(**telemetry(receiver.http_url))
    keys = ("sk-tenant-a", "sk-tenant-b")
    clients = [sdk_client(url, key, {"X-Run-Id": "shared-run"}) for key in keys]
    for client in (*clients, clients[0], clients[1]):  # interleaved: A, B, A, B
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 4 and len(r.named("invoke_agent")) == 2)
    traces = [trace_of("shared-run", key) for key in keys]
    assert traces[0] != traces[1]
    turns = {s.trace_id: s.span_id for s in receiver.named("invoke_agent")}
    assert set(turns) == set(traces)
    for chat in receiver.named("chat "):
        tenant = keys.index(next(k for k in keys if HASH(k) == chat.attributes["runguard.key_hash"]))
        assert chat.trace_id == traces[tenant] and chat.parent_span_id == turns[traces[tenant]]
