"""Gemini's OpenAI-compatible Chat Completions through the proxy.

Google documents the openai SDK against Gemini at `base_url=".../v1beta/openai/"` (and openai-agents
runs Gemini models that way: `OpenAIChatCompletionsModel` over such a client). Pointed at the proxy,
its requests reach `/v1beta/openai/chat/completions`: Chat Completions on the wire, sent on to the
Gemini upstream, guarded like any other.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool

from tests.conftest import ProxyFactory
from tests.e2e import agents
from tests.e2e.faults import eventually, requests_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, closed_port

GEMINI_KEY = "gemini-compat-key"


def compat(proxy_url: str, **kwargs: object) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy_url + "/v1beta/openai/", api_key=GEMINI_KEY, **kwargs)  # type: ignore[arg-type]


async def test_a_loop_over_gemini_s_openai_endpoint_is_read_and_stopped(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = agents.chat_script(steps=50)
    client = compat(await make_proxy(), default_headers={"X-Run-Id": "compat-loop"})
    with pytest.raises(openai.RateLimitError) as caught:
        await agents.chat_agent(client, agents.soft_error_tool, model="gemini-2.5-flash")
    assert caught.value.code == "runguard_non_progress"
    assert len(upstream.received) == 3
    assert {r.path for r in upstream.received} == {"/v1beta/openai/chat/completions"}
    assert upstream.received[0].headers["Authorization"] == f"Bearer {GEMINI_KEY}"
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert {(r.api, r.model) for r in requests_of(sink)} == {("chat", "gemini-2.5-flash")}


async def test_openai_agents_over_gemini_s_openai_endpoint_is_stopped(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = agents.chat_script(steps=50)
    model = OpenAIChatCompletionsModel(model="gemini-2.5-flash", openai_client=compat(await make_proxy()))

    @function_tool
    def parse_document(document: str, approach: str, attempt: int) -> str:
        """Parse a document."""
        return agents.soft_error_tool("parse_document", {})

    agent = Agent(name="extractor", instructions="Extract the total.", model=model, tools=[parse_document])
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(agent, "Extract the invoice total.", run_config=RunConfig(tracing_disabled=True), max_turns=20)
    assert caught.value.code == "runguard_non_progress"
    assert len(upstream.received) == 3


async def test_a_proxy_error_on_that_endpoint_is_in_openai_s_format(make_proxy: ProxyFactory) -> None:
    client = compat(await make_proxy(upstreams={"gemini": f"http://127.0.0.1:{closed_port()}"}), max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="gemini-2.5-flash", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    assert caught.value.code == "upstream_unreachable"  # read from OpenAI's error shape


async def test_records_and_metrics_agree_that_it_is_gemini_spoken_as_openai_chat(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = agents.chat_script(steps=1)
    url = await make_proxy()
    await compat(url).chat.completions.create(
        model="gemini-2.5-flash", messages=[{"role": "user", "content": "hi"}], stream=False
    )
    await eventually(lambda: len(requests_of(sink)) == 1)
    (record,) = requests_of(sink)
    assert (record.provider, record.api) == ("gemini", "chat")  # the upstream it went to, the dialect it spoke
    async with httpx.AsyncClient(base_url=url) as http:
        metrics = (await http.get("/runguard/metrics")).text
    counted = [
        line
        for line in metrics.splitlines()
        if line.startswith(("runguard_requests_total{", "runguard_upstream_latency_ms_count{"))
    ]
    assert counted and all(
        'provider="gemini",api="chat"' in line or 'api="chat",provider="gemini"' in line for line in counted
    ), counted
