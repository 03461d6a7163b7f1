"""Agent frameworks, unchanged, stopped through the real proxy: openai-agents (Responses and Chat) and google-adk.

Each test runs a real framework against the proxy on loopback, in front of a
scripted fake upstream that keeps asking for the same tool; the tool keeps
returning the same soft error, so `non_progress` trips on the 3rd identical
result. With the `error` response the framework raises the provider SDK's
own exception after one request (no retries); with `stop` the run ends
normally and its final output names the detector, also for an agent whose
output type is a pydantic model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import orjson
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    ShellTool,
    function_tool,
    set_tracing_disabled,
)
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.runners import Runner as AdkRunner
from google.adk.sessions import InMemorySessionService
from google.genai import errors as genai_errors
from google.genai import types
from pydantic import BaseModel

from tests.e2e import agents as loops
from tests.e2e import payloads
from tests.e2e.agents import sdk_model
from tests.e2e.faults import requests_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

STOP = {"guard": {"detectors": {"non_progress": {"response": "stop"}}}}
SOFT_ERROR = json.dumps({"status": "partial_parse_error", "data": None})

set_tracing_disabled(True)


def openai_client(proxy_url: str, run_id: str, sent: list[httpx.Request]) -> openai.AsyncOpenAI:
    async def count(request: httpx.Request) -> None:
        sent.append(request)

    return openai.AsyncOpenAI(  # default max_retries=2
        base_url=proxy_url + "/v1",
        api_key="sk-test-frameworks",
        default_headers={"X-Run-Id": run_id},
        http_client=httpx.AsyncClient(event_hooks={"request": [count]}),
    )


@function_tool
def parse_document(document: str, approach: str, attempt: int) -> str:
    """Parse a document with the given approach."""
    return SOFT_ERROR  # stuck: the same soft error whatever it is asked


class Extraction(BaseModel):
    total: float
    currency: str
    message: str


def _args(turn: int) -> str:
    approach = loops.APPROACHES[turn % len(loops.APPROACHES)]
    return json.dumps({"document": "invoice.pdf", "approach": approach, "attempt": turn})


# -- scripted model behaviour: the same tool every turn, new wording each time ----------------------


def responses_script(stream: bool) -> Callable[[Received], Reply]:
    def script(received: Received) -> Reply:
        body = received.json()
        turn = sum(1 for item in body["input"] if item.get("type") == "function_call_output")
        call = (f"call_{turn}", "parse_document", _args(turn))
        if not stream:
            return Reply.json(payloads.response_object(calls=[call]))
        return Reply.sse(_responses_call_stream(*call))

    return script


def _responses_call_stream(call_id: str, name: str, arguments: str) -> list[bytes]:
    done = payloads.response_object(calls=[(call_id, name, arguments)])
    item = done["output"][0]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**done, "status": "in_progress", "output": [], "usage": None}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": "", "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": item["id"],
            "output_index": 0,
            "delta": arguments,
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": item["id"],
            "output_index": 0,
            "arguments": arguments,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": done},
    ]
    return [
        f"event: {event['type']}\n".encode() + b"data: " + orjson.dumps({**event, "sequence_number": seq}) + b"\n\n"
        for seq, event in enumerate(events)
    ]


def chat_script(received: Received) -> Reply:
    body = received.json()
    turn = sum(1 for m in body["messages"] if m["role"] == "tool")
    return Reply.json(payloads.chat_completion(tool_calls=[(f"call_{turn}", "parse_document", _args(turn))]))


def gemini_script(received: Received) -> Reply:
    body = received.json()
    assert "Your internal name is" in json.dumps(body.get("systemInstruction"))  # really ADK on the wire
    turn = sum(1 for c in body["contents"] for p in c["parts"] if "functionResponse" in p)
    args = {"document": "invoice.pdf", "attempt": turn}
    return Reply.json(payloads.gemini_response(calls=[("parse_document", args)]))


# -- openai-agents ------------------------------------------------------------------------------------


def _model(kind: str, client: openai.AsyncOpenAI) -> OpenAIResponsesModel | OpenAIChatCompletionsModel:
    return sdk_model(kind, client, "gpt-4o" if kind == "responses" else "gpt-4o-mini")


def _agent(kind: str, client: openai.AsyncOpenAI, output_type: type[Any] | None = None) -> Agent[Any]:
    return Agent(
        name="Extractor",
        instructions="You extract invoice totals. Use parse_document.",
        tools=[parse_document],
        model=_model(kind, client),
        output_type=output_type,
    )


def _script(upstream: FakeUpstream, kind: str, stream: bool = False) -> None:
    upstream.script = responses_script(stream) if kind == "responses" else chat_script


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_openai_agents_error_ends_the_run_with_rate_limit_error(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], kind: str
) -> None:
    _script(upstream, kind)
    sent: list[httpx.Request] = []
    client = openai_client(await make_proxy(), f"agents-error-{kind}", sent)
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(_agent(kind, client), "Extract the invoice total.", max_turns=20)
    assert caught.value.code == "runguard_non_progress"
    assert f"agents-error-{kind}" in caught.value.message and "3 times" in caught.value.message
    assert len(upstream.received) == 3  # the 4th request carried the 3rd identical result
    assert len(sent) == 4  # neither openai-python nor the runner retried the 429


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_openai_agents_stop_ends_the_run_with_a_final_output_naming_the_detector(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], kind: str
) -> None:
    _script(upstream, kind)
    client = openai_client(await make_proxy(**STOP), f"agents-stop-{kind}", [])
    result = await Runner.run(_agent(kind, client), "Extract the invoice total.", max_turns=20)
    assert isinstance(result.final_output, str)
    assert "non_progress" in result.final_output and f"agents-stop-{kind}" in result.final_output
    assert "3 times" in result.final_output
    assert len(upstream.received) == 3


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_openai_agents_stop_for_an_output_type_parses_into_it(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], kind: str
) -> None:
    _script(upstream, kind)
    client = openai_client(await make_proxy(**STOP), f"agents-typed-{kind}", [])
    result = await Runner.run(_agent(kind, client, Extraction), "Extract the invoice total.", max_turns=20)
    assert isinstance(result.final_output, Extraction)
    assert "non_progress" in result.final_output.message
    assert len(upstream.received) == 3


async def test_openai_agents_streamed_responses_run_stops_with_a_final_output(
    upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    _script(upstream, "responses", stream=True)
    client = openai_client(await make_proxy(**STOP), "agents-streamed", [])
    result = Runner.run_streamed(_agent("responses", client, Extraction), "Extract the invoice total.", max_turns=20)
    kinds = [event.type async for event in result.stream_events()]
    assert "raw_response_event" in kinds
    assert isinstance(result.final_output, Extraction)  # needs the synthetic stream's response.completed
    assert "non_progress" in result.final_output.message
    assert len(upstream.received) == 3


async def test_openai_agents_streamed_responses_run_raises_on_error(
    upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    _script(upstream, "responses", stream=True)
    sent: list[httpx.Request] = []
    client = openai_client(await make_proxy(), "agents-streamed-error", sent)
    result = Runner.run_streamed(_agent("responses", client), "Extract the invoice total.", max_turns=20)
    with pytest.raises(openai.RateLimitError):
        await _drain(result.stream_events())
    assert len(sent) == 4


async def test_openai_agents_mid_stream_upstream_break_ends_the_run_with_an_error(
    upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    upstream.script = lambda _: Reply.sse(_responses_call_stream("call_0", "parse_document", _args(0)), reset_after=2)
    client = openai_client(await make_proxy(upstreams={"idle_timeout": 2}), "agents-broken", [])
    result = Runner.run_streamed(_agent("responses", client), "Extract the invoice total.", max_turns=20)
    with pytest.raises(openai.APIError) as caught:  # the `error` event's top-level `error` object
        await _drain(result.stream_events())
    assert not isinstance(caught.value, openai.APIStatusError)
    assert "mid-stream" in caught.value.message


def shell_script(received: Received) -> Reply:
    """The model runs the same failing command again and again through the built-in shell tool."""
    turn = sum(1 for item in received.json()["input"] if item.get("type") == "shell_call_output")
    action = {"commands": [f"cat invoice.txt  # attempt {turn}"], "timeout_ms": None, "max_output_length": None}
    call = {"type": "shell_call", "id": f"sh_{turn}", "call_id": f"call_{turn}", "action": action}
    return Reply.json({**payloads.response_object(), "output": [{**call, "status": "completed"}]})


async def test_openai_agents_shell_tool_stuck_on_the_same_failure_is_stopped(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    """A built-in tool the agent runs itself (`shell_call` items, not function calls) is a tool like any other."""
    upstream.script = shell_script
    client = openai_client(await make_proxy(**STOP), "agents-shell", [])
    shell = ShellTool(executor=lambda _: "cat: invoice.txt: No such file or directory")
    agent = Agent(name="Ops", instructions="Read files with the shell.", tools=[shell])
    agent.model = _model("responses", client)
    result = await Runner.run(agent, "What is in invoice.txt?", max_turns=20)
    assert isinstance(result.final_output, str) and "non_progress" in result.final_output
    assert len(upstream.received) == 3
    forwarded = [r for r in requests_of(sink) if r.blocked_by is None]
    assert [r.tool_calls for r in forwarded] == [("shell",)] * 3


def lookup_once_script(received: Received) -> Reply:
    """One lookup per question, then an answer (the server keeps the conversation: only new items come)."""
    if any(item.get("type") == "function_call_output" for item in received.json()["input"]):
        return Reply.json(payloads.response_object("Found it."))
    call = ("call_0", "parse_document", _args(0))
    return Reply.json(payloads.response_object(calls=[call]))


async def test_openai_agents_runs_on_server_side_conversations_are_one_run_each(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    """With `conversation_id` a step sends only its tool outputs, no user message: without a run header,
    each conversation is its own run, not one run shared by every conversation's later steps."""
    upstream.script = lookup_once_script
    url = await make_proxy()
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test-conversations")
    agent = Agent(name="Extractor", instructions="Use parse_document.", tools=[parse_document])
    agent.model = _model("responses", client)
    for k in range(3):
        await Runner.run(agent, f"Extract the total of invoice {k}.", conversation_id=f"conv_{k}")
    assert [body.json()["conversation"] for body in upstream.received] == ["conv_0"] * 2 + ["conv_1"] * 2 + [
        "conv_2"
    ] * 2
    runs = [r.run_id for r in requests_of(sink)]
    assert len(runs) == 6 and runs[0::2] == runs[1::2]  # each question's tool step is in its conversation's run
    assert len(set(runs)) == 3


async def _drain(events: AsyncIterator[Any]) -> None:
    async for _ in events:
        pass


# -- google-adk -------------------------------------------------------------------------------------


def _adk_agent(proxy_url: str, run_id: str, output_schema: type[BaseModel] | None = None) -> LlmAgent:
    def parse_document(document: str, attempt: int) -> dict[str, Any]:
        """Parse a document."""
        return {"status": "partial_parse_error", "data": None}

    headers = types.HttpOptions(headers={"X-Run-Id": run_id})
    return LlmAgent(
        name="extractor",
        model=Gemini(model="gemini-2.5-flash", base_url=proxy_url),
        instruction="You extract invoice totals. Use parse_document.",
        tools=[parse_document],
        output_schema=output_schema,
        generate_content_config=types.GenerateContentConfig(http_options=headers),
    )


async def _adk_run(agent: LlmAgent) -> list[str]:
    runner = AdkRunner(agent=agent, app_name="runguard-e2e", session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="runguard-e2e", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text="Extract the invoice total.")])
    texts: list[str] = []
    async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
        if event.content and event.content.parts:
            texts += [part.text for part in event.content.parts if part.text]
    return texts


async def test_adk_error_raises_resource_exhausted(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    upstream.script = gemini_script
    agent = _adk_agent(await make_proxy(), "adk-error")
    with pytest.raises(genai_errors.ClientError) as caught:
        await _adk_run(agent)
    error = caught.value  # ADK's _ResourceExhaustedError, a ClientError
    assert (error.code, error.status) == (429, "RESOURCE_EXHAUSTED")
    assert "non_progress" in (error.message or "") and "adk-error" in (error.message or "")  # X-Run-Id arrived
    assert len(upstream.received) == 3  # no retry by ADK or google-genai


async def test_adk_stop_ends_the_run_with_a_final_answer(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    upstream.script = gemini_script
    texts = await _adk_run(_adk_agent(await make_proxy(**STOP), "adk-stop"))
    assert texts and "non_progress" in texts[-1] and "adk-stop" in texts[-1]
    assert len(upstream.received) == 3


async def test_adk_with_retries_on_is_stopped_by_failed_precondition_after_one_request(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`guard.gemini_error_status: 400`: a client with HttpRetryOptions (5 attempts on 429) sends the stop once."""
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    upstream.script = gemini_script
    agent = _adk_agent(await make_proxy(guard={"gemini_error_status": 400}), "adk-retrying")
    assert isinstance(agent.model, Gemini)
    agent.model.retry_options = types.HttpRetryOptions()
    with pytest.raises(genai_errors.ClientError) as caught:
        await _adk_run(agent)
    assert (caught.value.code, caught.value.status) == (400, "FAILED_PRECONDITION")
    assert "non_progress" in (caught.value.message or "")
    assert len(upstream.received) == 3
    assert len(requests_of(sink)) == 4  # the 4th was answered locally, and not sent again


async def test_adk_stop_for_an_output_schema_parses_into_it(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    upstream.script = gemini_script
    texts = await _adk_run(_adk_agent(await make_proxy(**STOP), "adk-typed", Extraction))
    final = Extraction.model_validate_json(texts[-1])
    assert "non_progress" in final.message and "adk-typed" in final.message
    assert len(upstream.received) == 3
