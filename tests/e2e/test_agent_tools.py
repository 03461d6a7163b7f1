"""A lead that hands its tasks to another agent through a tool (openai-agents' `Agent.as_tool`, ADK's
`AgentTool`), with and without `X-Run-Id`.

The lead's calls to the agent tool are delegations: a fan-out of similar tasks ("Research ACME's pricing",
"... hiring") is not a spiral, and each sub-agent's run (each beginning with the same lookup) is judged as
a thread of its own. The same task handed over again and again with nothing changing is still stopped.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.runners import Runner as AdkRunner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.adk.tools.agent_tool import AgentTool
from google.genai import types

from tests.conftest import SdkClient
from tests.e2e import payloads
from tests.e2e.agents import sdk_model
from tests.e2e.faults import requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

set_tracing_disabled(True)

TOPICS = ("pricing", "hiring", "lawsuits", "products", "revenue", "offices")
RUN_HEADERS = [pytest.param({"X-Run-Id": "acme-report"}, id="header"), pytest.param({}, id="no-header")]


def _reply(kind: str, text: str = "", call: tuple[str, str, str] | None = None) -> Reply:
    calls = [call] if call else None
    if kind == "responses":
        return Reply.json(payloads.response_object(text, calls=calls))
    return Reply.json(payloads.chat_completion(text, tool_calls=calls))


def research_desk(kind: str, tasks: Callable[[int], str], answer: Callable[[str], str]) -> Callable[[Received], Reply]:
    """The lead hands `tasks(n)` to the researcher, one call per step, six in all, then reports; the
    researcher looks the company up (the same lookup every time, under a call id of its own, as a model's
    are), then answers `answer(task)`."""
    lookups = itertools.count()

    def script(received: Received) -> Reply:
        body = received.json()
        items = body["input"] if kind == "responses" else body["messages"]
        instructions = body["instructions"] if kind == "responses" else items[0]["content"]
        results = [i for i in items if i.get("type") == "function_call_output" or i.get("role") == "tool"]
        if instructions.startswith("You are the researcher"):
            if not results:
                return _reply(
                    kind, call=(f"call_lookup_{next(lookups)}", "lookup_company", json.dumps({"name": "ACME Corp"}))
                )
            task = [i["content"] for i in items if i.get("role") == "user"][-1]
            return _reply(kind, answer(task))
        if len(results) == len(TOPICS):
            return _reply(kind, "Report done.")
        step = len(results)
        return _reply(kind, call=(f"call_{step}", "research", json.dumps({"input": tasks(step)})))

    return script


@function_tool
def lookup_company(name: str) -> str:
    """Look a company up."""
    return f"{name}: founded 1999, 400 staff"


async def research(kind: str, client: openai.AsyncOpenAI) -> str:
    model = sdk_model(kind, client)
    researcher = Agent(name="Researcher", instructions="You are the researcher.", model=model, tools=[lookup_company])
    lead = Agent(
        name="Lead",
        instructions="You are the lead. Have each topic researched.",
        model=model,
        tools=[researcher.as_tool(tool_name="research", tool_description="Research one topic.")],
    )
    result = await Runner.run(lead, "Write a report on ACME Corp.", max_turns=20)
    return str(result.final_output)


@pytest.mark.parametrize("kind", ["responses", "chat"])
@pytest.mark.parametrize("headers", RUN_HEADERS)
async def test_openai_agents_lead_handing_similar_tasks_to_an_agent_tool_runs_to_its_end(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    sink: ListSink,
    sdk_client: SdkClient,
    kind: str,
    headers: dict[str, str],
) -> None:
    """Six templated tasks for one agent tool, each sub-agent starting with the same lookup: one run,
    nothing stopped, and the lead's steps recorded as handing work to the tool's agent."""
    upstream.script = research_desk(kind, lambda n: f"Research ACME Corp {TOPICS[n]} in detail", lambda t: f"on {t}")
    assert await research(kind, sdk_client(await make_proxy(), "sk-test-tools", headers)) == "Report done."
    records = requests_of(sink)
    assert len(records) == 19 and len({r.run_id for r in records}) == 1
    assert [r.handoff_to for r in records[::3]] == ["research"] * 6 + [None]
    assert [r.tool_calls for r in records[1::3]] == [("lookup_company",)] * 6
    assert not trips_of(sink)


def parallel_desk(received: Received) -> Reply:
    """The lead hands five topics to the researcher in one response; openai-agents runs the five at once."""
    body = received.json()
    if body["instructions"].startswith("You are the researcher"):
        task = [i["content"] for i in body["input"] if i.get("role") == "user"][-1]
        if not any(i.get("type") == "function_call_output" for i in body["input"]):
            lookup = (f"call_lookup_{len(task)}_{task.split()[2]}", "lookup_company", json.dumps({"name": "ACME Corp"}))
            return _reply("responses", call=lookup)
        return _reply("responses", f"on {task}")
    if any(i.get("type") == "function_call_output" for i in body["input"]):
        return _reply("responses", "Report done.")
    calls = [
        (f"call_{n}", "research", json.dumps({"input": f"Research ACME Corp {topic} in detail"}))
        for n, topic in enumerate(TOPICS[:5])
    ]
    return Reply.json(payloads.response_object(calls=calls))


@pytest.mark.parametrize("headers", RUN_HEADERS)
async def test_openai_agents_lead_handing_similar_tasks_to_an_agent_tool_at_once_runs_to_its_end(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    sink: ListSink,
    sdk_client: SdkClient,
    headers: dict[str, str],
) -> None:
    """Five similar tasks in one response, run at once, each beginning with the same lookup: a fan-out."""
    upstream.script = parallel_desk
    assert await research("responses", sdk_client(await make_proxy(), "sk-test-tools", headers)) == "Report done."
    records = requests_of(sink)
    assert len(records) == 12 and len({r.run_id for r in records}) == 1
    assert records[0].tool_calls == ("research",) * 5 and records[0].handoff_to == "research"
    assert not trips_of(sink)


@pytest.mark.parametrize("headers", RUN_HEADERS)
async def test_openai_agents_same_task_handed_to_an_agent_tool_again_and_again_is_stopped(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    sink: ListSink,
    sdk_client: SdkClient,
    headers: dict[str, str],
) -> None:
    """The lead hands the very same task over while the researcher keeps answering the same: a loop through
    the agent tool, stopped before the lead's fourth step."""
    upstream.script = research_desk("responses", lambda n: "Research ACME Corp pricing", lambda t: "no data found")
    with pytest.raises(openai.RateLimitError, match="handoff_cycle"):
        await research("responses", sdk_client(await make_proxy(), "sk-test-tools", headers))
    blocking = [t for t in trips_of(sink) if t.action == "block"]
    assert [(t.detector, t.request_index) for t in blocking] == [("handoff_cycle", 7)]


LANGUAGES = ("spanish", "french", "italian")
SENTENCE = "Good morning, how are you doing today?"


def translating(kind: str) -> Callable[[Received], Reply]:
    """openai-agents' agents-as-tools example: the orchestrator gives each translator agent the same sentence in
    one response, then answers with their translations."""

    def script(received: Received) -> Reply:
        body = received.json()
        items = body["input"] if kind == "responses" else body["messages"]
        instructions = body["instructions"] if kind == "responses" else items[0]["content"]
        if instructions.startswith("You translate"):
            return _reply(kind, f"({instructions.split()[-1]}) {SENTENCE}")
        if any(i.get("type") == "function_call_output" or i.get("role") == "tool" for i in items):
            return _reply(kind, "Here are the translations.")
        calls = [(f"call_{lang}", f"translate_to_{lang}", json.dumps({"input": SENTENCE})) for lang in LANGUAGES]
        if kind == "responses":
            return Reply.json(payloads.response_object(calls=calls))
        return Reply.json(payloads.chat_completion(tool_calls=calls))

    return script


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_openai_agents_orchestrator_giving_its_translators_the_same_sentence_at_once_runs_to_its_end(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient, kind: str
) -> None:
    """One text for three agent tools in one batch is a fan-out to three agents, not one lookup sprayed over
    three tools (`parallel_calls` stopped it at its first request)."""
    upstream.script = translating(kind)
    model = sdk_model(kind, sdk_client(await make_proxy(), "sk-test-tools"))
    translators = [
        Agent(name=f"{lang}_agent", instructions=f"You translate to {lang}", model=model).as_tool(
            tool_name=f"translate_to_{lang}", tool_description=f"Translate the user's message to {lang}."
        )
        for lang in LANGUAGES
    ]
    orchestrator = Agent(
        name="orchestrator", instructions="You orchestrate translations.", model=model, tools=translators
    )
    result = await Runner.run(orchestrator, f"Say '{SENTENCE}' in Spanish, French and Italian.")
    assert result.final_output == "Here are the translations."
    records = requests_of(sink)
    assert len(records) == 5 and len({r.run_id for r in records}) == 1
    assert records[0].tool_calls == tuple(f"translate_to_{lang}" for lang in LANGUAGES)
    assert not trips_of(sink)


def lookup(name: str) -> str:
    """Look a company up."""
    return f"{name}: founded 1999, 400 staff"


def adk_desk(received: Received) -> Reply:
    """ADK: the coordinator asks the researcher about each topic in turn; the researcher looks the company up
    first, then answers what it was asked."""
    body = received.json()
    system = json.dumps(body["systemInstruction"])
    contents = body["contents"]
    responses = [p for c in contents for p in c["parts"] if "functionResponse" in p]
    if "You research" in system:
        if not responses:
            parts: list[dict[str, Any]] = [{"functionCall": {"name": "lookup", "args": {"name": "ACME Corp"}}}]
        else:
            asked = next(p["text"] for c in contents for p in c["parts"] if "text" in p)
            parts = [{"text": f"on {asked}"}]
    elif len(responses) == len(TOPICS):
        parts = [{"text": "Report done."}]
    else:
        task = f"Research ACME Corp {TOPICS[len(responses)]} in detail"
        parts = [{"functionCall": {"name": "researcher", "args": {"request": task}}}]
    reply = payloads.gemini_response()
    reply["candidates"][0]["content"]["parts"] = parts
    return Reply.json(reply)


@pytest.mark.parametrize("headers", RUN_HEADERS)
async def test_adk_coordinator_handing_similar_requests_to_an_agent_tool_runs_to_its_end(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    sink: ListSink,
    monkeypatch: pytest.MonkeyPatch,
    headers: dict[str, str],
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    upstream.script = adk_desk
    url = await make_proxy()
    config = types.GenerateContentConfig(http_options=types.HttpOptions(headers=headers))
    model = Gemini(model="gemini-2.5-flash", base_url=url)
    researcher = LlmAgent(
        name="researcher",
        model=model,
        instruction="You research.",
        description="Researches one topic.",
        tools=[FunctionTool(lookup)],
        generate_content_config=config,
    )
    coordinator = LlmAgent(
        name="coordinator",
        model=model,
        instruction="You coordinate.",
        tools=[AgentTool(researcher)],
        generate_content_config=config,
    )
    runner = AdkRunner(agent=coordinator, app_name="runguard-tools", session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="runguard-tools", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text="Write a report on ACME Corp.")])
    texts = [
        part.text
        async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message)
        if event.content and event.content.parts
        for part in event.content.parts
        if part.text
    ]
    assert texts[-1] == "Report done."
    records = requests_of(sink)
    assert len(records) == 19 and len({r.run_id for r in records}) == 1
    assert [(r.agent, r.handoff_to) for r in records[::3]] == [("coordinator", "researcher")] * 6 + [
        ("coordinator", None)
    ]
    assert not trips_of(sink)
