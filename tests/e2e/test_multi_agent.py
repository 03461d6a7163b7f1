"""Multi-agent runs of the real frameworks through the real proxy: who speaks, who hands over, and when it stops.

openai-agents (handoffs, Responses and Chat) and google-adk (`sub_agents` with
`transfer_to_agent`) run unchanged against the proxy on loopback, in front of
a scripted fake upstream that plays the model: agents that only hand the work
back and forth, a writer/editor review loop whose drafts change every round,
a coordinator routing a session's questions to specialists, chains of
transfers, and an agent used as a tool. The records and the admin API show
each request's agent and handoff target; `handoff_cycle` must stop the
ping-pong and the endless review, `delegation` a transfer back into the chain
and a chain deeper than five, and nothing may stop the healthy runs.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.runners import Runner as AdkRunner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.agent_tool import AgentTool
from google.genai import errors as genai_errors
from google.genai import types

from tests.e2e import payloads
from tests.e2e.agents import sdk_model
from tests.e2e.faults import requests_of, trips_of
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

set_tracing_disabled(True)

# What a scripted agent says on its turn: (text, the agent it hands over to or None to answer).
Turn = tuple[str, str | None]
Role = Callable[[str, int], Turn]  # (speaking agent, how many requests upstream has seen) -> turn


@pytest.fixture
async def openai_clients() -> AsyncIterator[list[openai.AsyncOpenAI]]:
    """Clients the test makes, closed at its end while the event loop still runs."""
    clients: list[openai.AsyncOpenAI] = []
    yield clients
    for client in clients:
        await client.close()


def ping_pong(agent: str, seen: int) -> Turn:
    """Each agent hands straight over to the other one, saying nothing."""
    return "", {"triage": "billing", "billing": "triage"}[agent]


def review(rounds: int) -> Role:
    """A writer drafts and hands to the editor, who comments and hands back, until the `rounds`-th draft passes."""

    def role(agent: str, seen: int) -> Turn:
        round_ = (seen - 1) // 2
        if agent == "writer":
            return f"Draft v{round_}: the harbour at dawn, stanza {round_} rewritten", "editor"
        if round_ >= rounds - 1:
            return "Approved.", None
        return f"Comments on v{round_}: tighten stanza {round_}", "writer"

    return role


# -- openai-agents --------------------------------------------------------------------------------


def _openai_reply(kind: str, turn: Turn, call_id: str) -> Reply:
    text, target = turn
    call = (call_id, f"transfer_to_{target}", "{}") if target else None
    if kind == "responses":
        body = payloads.response_object(text or "-")
        if call:
            body["output"] = (body["output"] if text else []) + payloads.response_object(calls=[call])["output"]
        return Reply.json(body)
    body = payloads.chat_completion(text, tool_calls=[call] if call else None)
    body["choices"][0]["message"]["content"] = text or None
    return Reply.json(body)


def openai_script(upstream: FakeUpstream, kind: str, role: Role) -> Callable[[Received], Reply]:
    """The model of every agent: the agent is recognised by its instructions ("You are <name>. ...")."""

    def script(received: Received) -> Reply:
        body = received.json()
        instructions = body["instructions"] if kind == "responses" else body["messages"][0]["content"]
        agent = instructions.split(".")[0].removeprefix("You are ").lower()
        seen = len(upstream.received)
        return _openai_reply(kind, role(agent, seen), f"call_{seen}")

    return script


def openai_pair(client: openai.AsyncOpenAI, kind: str, first: str, second: str) -> Agent[Any]:
    """Two agents that can hand over to each other; returns the first."""
    model = sdk_model(kind, client)
    one = Agent(name=first.title(), instructions=f"You are {first}. Do your part.", model=model)
    two = Agent(name=second.title(), instructions=f"You are {second}. Do your part.", model=model)
    one.handoffs = [two]
    two.handoffs = [one]
    return one


def openai_ring(model: Any, names: list[str]) -> Agent[Any]:
    """Agents that each hand over to the next one, the last to the first; returns the first."""
    ring = [Agent(name=name.title(), instructions=f"You are {name}. Do your part.", model=model) for name in names]
    for agent, following in zip(ring, ring[1:] + ring[:1], strict=True):
        agent.handoffs = [following]
    return ring[0]


async def client_for(
    make_proxy: Callable[..., Any], run_id: str, clients: list[openai.AsyncOpenAI]
) -> openai.AsyncOpenAI:
    url = await make_proxy()
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test-multi", default_headers={"X-Run-Id": run_id})
    clients.append(client)
    return client


KINDS = ["responses", "chat"]


def desk_script(upstream: FakeUpstream, kind: str) -> Callable[[Received], Reply]:
    """A help desk: triage sends each question to billing first, and on to support when billing hands it
    back; support looks the ticket up before it answers. Every turn names the question it is about."""

    def script(received: Received) -> Reply:
        body = received.json()
        items = body["input"] if kind == "responses" else body["messages"]
        instructions = body["instructions"] if kind == "responses" else items[0]["content"]
        agent = instructions.split(".")[0].removeprefix("You are ")
        asked = [item["content"] for item in items if item.get("role") == "user"][-1]
        question, topic = asked.split()[0], asked.split()[1].rstrip(":")
        last = str(items[-1].get("output") or items[-1].get("content") or "")
        seen = len(upstream.received)
        if agent == "triage":
            target = "support" if '"assistant"' in last else "billing"  # handed back: billing said no
            return _openai_reply(kind, (f"routing {question}", target), f"call_{seen}")
        if agent != topic:
            return _openai_reply(kind, (f"{question} is not for {agent}", "triage"), f"call_{seen}")
        if agent == "support" and "ticket of" not in last:
            call = (f"call_{seen}", "lookup", json.dumps({"question": question}))
            if kind == "responses":
                return Reply.json(payloads.response_object(calls=[call]))
            return Reply.json(payloads.chat_completion(tool_calls=[call]))
        return _openai_reply(kind, (f"{agent} answers {question}", None), f"call_{seen}")

    return script


@function_tool
def lookup(question: str) -> str:
    """Look the question's ticket up."""
    return f"ticket of {question}"


def desk(model: Any) -> Agent[Any]:
    """The help desk's agents on `model`: triage hands to billing or support, each hands back to triage."""
    triage, billing, support = (
        Agent(name=name.title(), instructions=f"You are {name}. Do your part.", model=model)
        for name in ("triage", "billing", "support")
    )
    triage.handoffs, billing.handoffs, support.handoffs = [billing, support], [triage], [triage]
    support.tools = [lookup]
    return triage


async def ask_desk(triage: Agent[Any], topics: list[str]) -> None:
    """One session: each question starts at triage, with the session so far."""
    history: list[Any] = []
    for i, topic in enumerate(topics, 1):
        asked = {"role": "user", "content": f"Q{i} {topic}: question {i}"}
        result = await Runner.run(triage, [*history, asked], max_turns=10)
        assert result.final_output == f"{topic} answers Q{i}"
        history = result.to_input_list()


@pytest.mark.parametrize("kind", KINDS)
async def test_openai_agents_handoff_ping_pong_trips_handoff_cycle(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    openai_clients: list[openai.AsyncOpenAI],
    sink: ListSink,
    kind: str,
) -> None:
    upstream.script = openai_script(upstream, kind, ping_pong)
    triage = openai_pair(await client_for(make_proxy, f"pp-{kind}", openai_clients), kind, "triage", "billing")
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(triage, "My invoice is wrong.", max_turns=30)
    assert caught.value.code == "runguard_handoff_cycle"
    assert "repeated with the same payload" in caught.value.message
    assert len(upstream.received) == 4  # triage, billing, triage, billing: the 2nd billing -> triage trips
    records = requests_of(sink)
    agents = [r.agent for r in records]
    # No names on the wire: the first agent is known by a fingerprint of its instructions and tools until
    # it is handed work, when the handoff's acknowledgement ({"assistant": "Triage"}) names it.
    assert agents[0].startswith("agent-") and agents[1:] == ["billing", "triage", "billing", "triage"]
    assert [r.handoff_to for r in records] == ["billing", "triage", "billing", "triage", None]
    assert records[-1].blocked_by == "handoff_cycle"
    (trip,) = trips_of(sink)
    assert trip.evidence["pair"] == ["billing", "triage"]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_openai_agents_help_desk_session_routing_question_after_question_to_billing_is_not_stopped(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, kind: str
) -> None:
    """Seven questions, each routed triage -> billing in one session (one run): seven handoffs of one pair,
    each for a new question of the user's. `handoff_cycle`'s hard limit (4) counts per question."""
    upstream.script = desk_script(upstream, kind)
    client = openai.AsyncOpenAI(base_url=await make_proxy() + "/v1", api_key="sk-test-desk", max_retries=0)
    await ask_desk(desk(sdk_model(kind, client)), ["billing"] * 7)
    await client.close()
    records = requests_of(sink)
    assert len({r.run_id for r in records}) == 1
    assert [r.handoff_to for r in records] == ["billing", None] * 7
    assert [t.detector for t in trips_of(sink)] == []


@pytest.mark.parametrize("kind", KINDS)
async def test_openai_agents_review_loop_with_changing_drafts_runs_to_the_end(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    openai_clients: list[openai.AsyncOpenAI],
    sink: ListSink,
    kind: str,
) -> None:
    """Four rounds of writer -> editor -> writer, each draft new: the hard limit (4 per pair) lets it finish."""
    upstream.script = openai_script(upstream, kind, review(rounds=4))
    writer = openai_pair(await client_for(make_proxy, f"review-{kind}", openai_clients), kind, "writer", "editor")
    result = await Runner.run(writer, "Write a poem about a harbour.", max_turns=30)
    assert result.final_output == "Approved."
    assert len(upstream.received) == 8
    assert [r.handoff_to for r in requests_of(sink)] == ["editor", "writer"] * 3 + ["editor", None]
    assert not [t.detector for t in trips_of(sink) if t.action == "block"]


@pytest.mark.parametrize("kind", KINDS)
async def test_openai_agents_review_loop_past_the_hard_limit_trips_handoff_cycle(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], openai_clients: list[openai.AsyncOpenAI], kind: str
) -> None:
    upstream.script = openai_script(upstream, kind, review(rounds=8))
    writer = openai_pair(await client_for(make_proxy, f"endless-{kind}", openai_clients), kind, "writer", "editor")
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(writer, "Write a poem about a harbour.", max_turns=30)
    assert caught.value.code == "runguard_handoff_cycle"
    assert "-> editor happened 5 times since the user's last question, over the limit of 4" in caught.value.message
    assert len(upstream.received) == 9  # the 5th writer -> editor handoff trips


# -- google-adk -----------------------------------------------------------------------------------

_ADK_NAME = re.compile(r'Your internal name is "([^"]+)"')


def adk_script(upstream: FakeUpstream, role: Role) -> Callable[[Received], Reply]:
    """The model of every ADK agent, recognised by the name ADK writes into its system instruction."""

    def script(received: Received) -> Reply:
        body = received.json()
        found = _ADK_NAME.search(json.dumps(body["systemInstruction"]).replace('\\"', '"'))
        assert found is not None
        text, target = role(found.group(1), len(upstream.received))
        parts: list[dict[str, Any]] = [{"text": text}] if text else []
        if target:
            parts.append({"functionCall": {"name": "transfer_to_agent", "args": {"agent_name": target}}})
        body = payloads.gemini_response()
        body["candidates"][0]["content"]["parts"] = parts
        return Reply.json(body)

    return script


def adk_agent(proxy_url: str, run_id: str, name: str, sub_agents: list[LlmAgent] | None = None) -> LlmAgent:
    headers = types.HttpOptions(headers={"X-Run-Id": run_id})
    return LlmAgent(
        name=name,
        model=Gemini(model="gemini-2.5-flash", base_url=proxy_url),
        instruction=f"You are the {name}.",
        description=f"The {name}.",
        sub_agents=sub_agents or [],
        generate_content_config=types.GenerateContentConfig(http_options=headers),
    )


async def adk_session(root: LlmAgent, *questions: str) -> list[str]:
    """Ask `questions` in one session, in turn; the texts the agents answered."""
    runner = AdkRunner(agent=root, app_name="runguard-multi", session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="runguard-multi", user_id="u1")
    texts: list[str] = []
    for question in questions:
        message = types.Content(role="user", parts=[types.Part(text=question)])
        async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            if event.content and event.content.parts:
                texts += [part.text for part in event.content.parts if part.text]
    return texts


@pytest.fixture
def google_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")


@pytest.mark.usefixtures("google_key")
async def test_adk_transfer_ping_pong_trips_handoff_cycle(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    upstream.script = adk_script(upstream, ping_pong)
    url = await make_proxy()
    triage = adk_agent(url, "adk-pp", "triage", [adk_agent(url, "adk-pp", "billing")])
    with pytest.raises(genai_errors.ClientError) as caught:
        await adk_session(triage, "My invoice is wrong.")
    assert caught.value.code == 429 and "handoff_cycle" in (caught.value.message or "")
    records = requests_of(sink)
    assert [r.agent for r in records[:4]] == ["triage", "billing", "triage", "billing"]
    assert [r.handoff_to for r in records[:4]] == ["billing", "triage", "billing", "triage"]
    assert records[-1].blocked_by == "handoff_cycle" and len(upstream.received) == len(records) - 1


@pytest.mark.usefixtures("google_key")
async def test_adk_review_loop_with_changing_drafts_runs_to_the_end(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    upstream.script = adk_script(upstream, review(rounds=4))
    url = await make_proxy()
    writer = adk_agent(url, "adk-review", "writer", [adk_agent(url, "adk-review", "editor")])
    texts = await adk_session(writer, "Write a poem about a harbour.")
    assert texts[-1] == "Approved."
    assert len(upstream.received) == 8
    assert not [t.detector for t in trips_of(sink) if t.action == "block"]


@pytest.mark.usefixtures("google_key")
async def test_adk_review_loop_past_the_hard_limit_trips_handoff_cycle(
    upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    upstream.script = adk_script(upstream, review(rounds=8))
    url = await make_proxy()
    writer = adk_agent(url, "adk-endless", "writer", [adk_agent(url, "adk-endless", "editor")])
    with pytest.raises(genai_errors.ClientError) as caught:
        await adk_session(writer, "Write a poem about a harbour.")
    assert "handoff writer -> editor happened 5 times since the user's last question, over the limit of 4" in (
        caught.value.message or ""
    )
    assert len(upstream.received) == 9


def routing(agent: str, seen: int, question: str) -> Turn:
    """Customer service: the coordinator routes each question, a specialist answers its own kind or goes home."""
    topic = question.split()[1].rstrip(":")
    if agent == topic:
        return f"{agent} answers {question}", None
    return "", topic if agent == "coordinator" else "coordinator"


def last_question(received: Received) -> str:
    texts = [part["text"] for content in received.json()["contents"] for part in content["parts"] if "text" in part]
    return [text for text in texts if text.startswith("Q")][-1]


async def ask_adk_desk(upstream: FakeUpstream, url: str, run_id: str, topics: list[str]) -> None:
    """An ADK coordinator with a billing and a support specialist, asked a question of each topic in turn
    in one session (run `run_id`): each question is answered by its specialist."""
    upstream.script = adk_script(
        upstream, lambda agent, seen: routing(agent, seen, last_question(upstream.received[-1]))
    )
    specialists = [adk_agent(url, run_id, "billing"), adk_agent(url, run_id, "support")]
    coordinator = adk_agent(url, run_id, "coordinator", specialists)
    texts = await adk_session(coordinator, *[f"Q{i} {topic}: question {i}" for i, topic in enumerate(topics, 1)])
    assert texts == [f"{topic} answers Q{i} {topic}: question {i}" for i, topic in enumerate(topics, 1)]


@pytest.mark.usefixtures("google_key")
async def test_adk_coordinator_routing_a_session_of_questions_is_not_stopped(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    """ADK's coordinator/specialist pattern: each question is transferred to its specialist, who answers;
    a question for the other specialist goes back to the parent first. Every handoff is the same call."""
    await ask_adk_desk(upstream, await make_proxy(), "adk-desk", ["billing", "support"] * 3)
    assert not [t.detector for t in trips_of(sink) if t.action == "block"]
    assert [r.agent for r in requests_of(sink)[:3]] == ["coordinator", "billing", "billing"]
    assert [r.handoff_to for r in requests_of(sink)[:4]] == ["billing", None, "coordinator", "support"]


# -- delegation -----------------------------------------------------------------------------------


def relay(order: list[str], back_to: str | None = None) -> Role:
    """Each agent hands to the one after it in `order`; the last one hands to `back_to`, or answers."""

    def role(agent: str, seen: int) -> Turn:
        following = [*order[order.index(agent) + 1 :], back_to]
        return ("", following[0]) if following[0] else ("Done.", None)

    return role


@pytest.mark.usefixtures("google_key")
async def test_adk_coordinator_routing_a_long_session_of_questions_is_not_stopped(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    """Ten questions alternating billing and support: every pair of agents hands over five times or more in
    the session, once per question. ADK's quotes of the other agents' turns are no questions of the user's."""
    await ask_adk_desk(upstream, await make_proxy(), "adk-long-desk", ["billing", "support"] * 5)
    handoffs = [(r.agent, r.handoff_to) for r in requests_of(sink) if r.handoff_to]
    assert handoffs.count(("coordinator", "billing")) >= 5
    assert [t.detector for t in trips_of(sink) if t.action == "block"] == []


@pytest.mark.usefixtures("google_key")
async def test_adk_transfer_to_a_peer_already_in_the_chain_trips_delegation(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    """root -> intake -> research -> review -> intake: intake is handed work while the chain still runs through it."""
    upstream.script = adk_script(upstream, relay(["root", "intake", "research", "review"], back_to="intake"))
    url = await make_proxy()
    peers = [adk_agent(url, "adk-peers", name) for name in ("intake", "research", "review")]
    with pytest.raises(genai_errors.ClientError) as caught:
        await adk_session(adk_agent(url, "adk-peers", "root", peers), "Look into this.")
    assert (
        "agent 'intake' is handed work while already in the delegation chain root -> intake -> research -> review"
        in (caught.value.message or "")
    )
    assert len(upstream.received) == 4
    (trip,) = trips_of(sink)
    assert trip.detector == "delegation" and trip.evidence["chain"] == ["root", "intake", "research", "review"]


@pytest.mark.usefixtures("google_key")
async def test_adk_sub_agents_nested_deeper_than_five_trip_delegation(
    upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    names = ["root", "l1", "l2", "l3", "l4", "l5", "l6"]
    upstream.script = adk_script(upstream, relay(names))
    url = await make_proxy()
    agent = adk_agent(url, "adk-deep", names[-1])
    for name in reversed(names[:-1]):
        agent = adk_agent(url, "adk-deep", name, [agent])
    with pytest.raises(genai_errors.ClientError) as caught:
        await adk_session(agent, "Go down.")
    assert "delegation chain is 6 agents deep, over the limit of 5: root -> l1 -> l2 -> l3 -> l4 -> l5" in (
        caught.value.message or ""
    )
    assert len(upstream.received) == 5  # l4's handoff to l5 trips: l5 is never asked


@pytest.mark.parametrize("kind", KINDS)
async def test_openai_agents_chain_of_handoffs_deeper_than_five_trips_delegation(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], openai_clients: list[openai.AsyncOpenAI], kind: str
) -> None:
    names = ["a0", "a1", "a2", "a3", "a4", "a5", "a6"]
    upstream.script = openai_script(upstream, kind, relay(names))
    client = await client_for(make_proxy, f"deep-{kind}", openai_clients)
    model = sdk_model(kind, client)
    agents: list[Agent[Any]] = []
    for name in reversed(names):
        agents.insert(
            0, Agent(name=name, instructions=f"You are {name}. Do your part.", model=model, handoffs=agents[:1])
        )
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(agents[0], "Go down.", max_turns=30)
    assert caught.value.code == "runguard_delegation" and "6 agents deep, over the limit of 5" in caught.value.message
    assert len(upstream.received) == 5


@pytest.mark.parametrize("kind", KINDS)
async def test_openai_agents_handoff_back_to_the_first_agent_past_its_parent_trips_delegation(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    openai_clients: list[openai.AsyncOpenAI],
    sink: ListSink,
    kind: str,
) -> None:
    """triage -> billing -> refunds -> triage: the first agent, known only by its fingerprint until then,
    is named by the handoff that re-enters it and caught as the agent already at the chain's root."""
    upstream.script = openai_script(upstream, kind, relay(["triage", "billing", "refunds"], back_to="triage"))
    client = await client_for(make_proxy, f"reenter-{kind}", openai_clients)
    model = sdk_model(kind, client)
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(openai_ring(model, ["triage", "billing", "refunds"]), "My refund never arrived.", max_turns=30)
    assert caught.value.code == "runguard_delegation"
    assert (
        "agent 'triage' is handed work while already in the delegation chain triage -> billing -> refunds"
        in caught.value.message
    )
    assert len(upstream.received) == 4  # triage's own request after the handoff back trips: the next is stopped
    (trip,) = [t for t in trips_of(sink) if t.action == "block"]
    assert trip.evidence["chain"] == ["triage", "billing", "refunds"]


# -- what the admin API shows ---------------------------------------------------------------------


@pytest.mark.usefixtures("google_key")
async def test_the_admin_api_shows_each_request_s_agent_and_handoff_and_the_trip(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = adk_script(upstream, review(rounds=8))
    store = {"database_url": f"sqlite+aiosqlite:///{tmp_path}/runs.db", "flush_interval": 0.02}
    proxy = await start_proxy(settings_for(upstream.url, store=store))  # no test sink: records go to the store
    try:
        writer = adk_agent(proxy.url, "adk-admin", "writer", [adk_agent(proxy.url, "adk-admin", "editor")])
        with pytest.raises(genai_errors.ClientError):
            await adk_session(writer, "Write a poem about a harbour.")
        async with httpx.AsyncClient(base_url=proxy.url) as admin:
            await eventually_stored(admin, "adk-admin", requests=10)
            (run,) = (await admin.get("/runguard/runs")).json()["runs"]
            detail = (await admin.get("/runguard/runs/adk-admin")).json()
            trips = (await admin.get("/runguard/trips", params={"run_id": "adk-admin"})).json()["trips"]
    finally:
        await proxy.stop()
    assert run["agents"] == ["writer", "editor"] and run["status"].startswith("tripped:")
    steps = [(step["agent"], step["handoff_to"], step["blocked_by"]) for step in detail["timeline"]]
    assert steps == [("writer", "editor", None), ("editor", "writer", None)] * 4 + [
        ("writer", "editor", None),
        ("editor", None, "handoff_cycle"),
    ]
    blocking = [trip for trip in trips if trip["action"] == "block"]
    assert [(t["detector"], t["request_index"], t["evidence"]["pair"]) for t in blocking] == [
        ("handoff_cycle", 9, ["writer", "editor"])
    ]


async def eventually_stored(admin: httpx.AsyncClient, run_id: str, requests: int) -> None:
    """Wait for the store's writer (it flushes every 20 ms here) to hold the run's requests."""
    for _ in range(200):
        runs = (await admin.get("/runguard/runs")).json()["runs"]
        if any(run["run_id"] == run_id and run["requests"] == requests for run in runs):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {run_id} never reached {requests} stored requests")


def translating(received: Received) -> Reply:
    """The orchestrator has three sentences translated by the translator agent, one call each, then answers."""
    body = received.json()
    if body["instructions"].startswith("You are translator"):
        asked = [item["content"] for item in body["input"] if item.get("role") == "user"][-1]
        return Reply.json(payloads.response_object(f"translated: {asked}"))
    done = sum(1 for item in body["input"] if item.get("type") == "function_call_output")
    if done == 3:
        return Reply.json(payloads.response_object("All translated."))
    call = (f"call_{done}", "translate", json.dumps({"input": f"the sentence number {done}"}))
    return Reply.json(payloads.response_object(calls=[call]))


async def translate_three(client: openai.AsyncOpenAI, settings: ModelSettings | None = None) -> None:
    model = OpenAIResponsesModel(model="gpt-4o", openai_client=client)
    settings = settings or ModelSettings()
    translator = Agent(
        name="Translator", instructions="You are translator. Translate.", model=model, model_settings=settings
    )
    orchestrator = Agent(
        name="Orchestrator",
        instructions="You are orchestrator. Translate every sentence.",
        model=model,
        model_settings=settings,
        tools=[translator.as_tool(tool_name="translate", tool_description="Translate a sentence.")],
    )
    result = await Runner.run(orchestrator, "Translate my three sentences.", max_turns=10)
    assert result.final_output == "All translated."


async def test_openai_agents_agent_used_as_a_tool_speaks_as_itself_and_is_delegated_to(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], openai_clients: list[openai.AsyncOpenAI], sink: ListSink
) -> None:
    """`Agent.as_tool`: the orchestrator calls the translator three times, each call a delegation to the tool's
    agent (no transfer: the orchestrator gets the answer back) and a thread of its own."""
    upstream.script = translating
    await translate_three(await client_for(make_proxy, "as-tool", openai_clients))
    records = requests_of(sink)
    agents = [r.agent for r in records]
    assert len(set(agents)) == 2 and agents == [agents[0], agents[1]] * 3 + [agents[0]]
    assert [r.tool_calls for r in records] == [("translate",), ()] * 3 + [()]
    assert [r.handoff_to for r in records] == ["translate", None] * 3 + [None]
    assert not [r for r in records if r.blocked_by] and not trips_of(sink)


@pytest.mark.parametrize("end_user", [None, "user-4711"])
async def test_openai_agents_agent_used_as_a_tool_without_a_run_header_is_booked_to_the_caller_s_run(
    upstream: FakeUpstream,
    make_proxy: Callable[..., Any],
    openai_clients: list[openai.AsyncOpenAI],
    sink: ListSink,
    end_user: str | None,
) -> None:
    """No `X-Run-Id`: each translator thread starts with the text the orchestrator's call handed it, and joins
    the orchestrator's run, as it would under one header; also when every request names its end user."""
    upstream.script = translating
    client = openai.AsyncOpenAI(base_url=await make_proxy() + "/v1", api_key="sk-test-multi")
    openai_clients.append(client)
    await translate_three(client, ModelSettings(extra_args={"safety_identifier": end_user}) if end_user else None)
    records = requests_of(sink)
    assert len(records) == 7 and len({r.agent for r in records}) == 2
    assert len({r.run_id for r in records}) == 1
    assert {r.json().get("safety_identifier") for r in upstream.received} == {end_user}


@pytest.mark.usefixtures("google_key")
async def test_adk_agent_tool_without_a_run_header_is_booked_to_the_caller_s_run(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    """ADK's `AgentTool`: the researcher runs in a session of its own, started with the coordinator's request."""
    asked = "find the tide tables for the harbour in May"

    def script(received: Received) -> Reply:
        body = received.json()
        body_text = json.dumps(body)
        parts: list[dict[str, Any]]
        if 'internal name is \\"researcher' in body_text:
            parts = [{"text": "High tide at 06:10."}]
        elif "functionResponse" in body_text:
            parts = [{"text": "Done."}]
        else:
            parts = [{"functionCall": {"name": "researcher", "args": {"request": asked}}}]
        reply = payloads.gemini_response()
        reply["candidates"][0]["content"]["parts"] = parts
        return Reply.json(reply)

    upstream.script = script
    url = await make_proxy()
    model = Gemini(model="gemini-2.5-flash", base_url=url)
    researcher = LlmAgent(name="researcher", model=model, instruction="You research.", description="Researches.")
    coordinator = LlmAgent(
        name="coordinator", model=model, instruction="You coordinate.", tools=[AgentTool(researcher)]
    )
    assert await adk_session(coordinator, "When is high tide?") == ["Done."]  # the tool's session is its own
    records = requests_of(sink)
    assert [r.agent for r in records] == ["coordinator", "researcher", "coordinator"]
    assert len({r.run_id for r in records}) == 1
