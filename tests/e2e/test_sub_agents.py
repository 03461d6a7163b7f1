"""A coordinator asking its five sub-agents (agents exposed as tools: openai-agents' `Agent.as_tool`, ADK's
`AgentTool`) in turn, round after round, through the real proxy.

Asked again in new words, each sub-agent answering what it answered before, the coordinator is stopped by
`non_progress` at the third identical answer of one sub-agent, as a single tool answering the same is
(`test_runaway.test_soft_error_loop_trips_non_progress_at_the_third_identical_result`), though the other
sub-agents' answers come between. (Five asked at once, round after round, are `parallel_calls`' and
`fan_out`'s: `test_fan_out`.) A coordinator asking its sub-agents new questions each round and getting new
answers runs to its end. A real Agno Team's leader, delegating to its five members through its one tool
(`delegate_task_to_member(member_id, task)`), is judged the same: each member's answers among its own.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from agents import Runner, set_tracing_disabled
from agno.run.base import RunStatus
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.runners import Runner as AdkRunner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.agent_tool import AgentTool
from google.genai import errors as genai_errors
from google.genai import types

from tests.conftest import SdkClient
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.e2e.teams import agno_team
from tests.e2e.test_fan_out import DESKS, REWORDED, planner
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

set_tracing_disabled(True)

FIVE = DESKS[:5]
ROUNDS = 8  # the coordinator's rounds before it reports, if nothing stops it
NEW_TASKS = [
    "list the options from Lisbon to Berlin in May",
    "book the option the traveller picked: reference TP552",
    "send the confirmation to the traveller's calendar and email",
    "check for changes to the booking a week before departure",
]
Answer = Callable[[str, int], str]  # (desk, round) -> the desk's answer


def same_answer(desk: str, round_: int) -> str:
    return f"{desk}: three options, TAP TP552 at 89 EUR, easyJet U27331 at 64 EUR, Ryanair FR1882 at 41 EUR"


def new_answer(desk: str, round_: int) -> str:
    return (
        f"{desk}, step {round_ + 1}: {NEW_TASKS[round_ % len(NEW_TASKS)]}: done, reference {desk[:2].upper()}{round_}7"
    )


def asked(tasks: list[str], round_: int, desk: str) -> str:
    return f"{desk}: {tasks[round_ % len(tasks)]}"


# -- openai-agents ----------------------------------------------------------------------------------------


def openai_coordinator(kind: str, tasks: list[str], rounds: int, answer: Answer) -> Callable[[Received], Reply]:
    """The coordinator asks one desk per turn (`ask_<desk>`, in turn), `rounds` rounds, then reports; each
    desk agent answers `answer(desk, round)`."""

    def reply(text: str | None = None, calls: list[tuple[str, str, str]] | None = None) -> Reply:
        if kind == "responses":
            return Reply.json(payloads.response_object(text or "", calls=calls))
        return Reply.json(payloads.chat_completion(text, tool_calls=calls))

    def script(received: Received) -> Reply:
        body = received.json()
        items = body["input"] if kind == "responses" else body["messages"]
        instructions = body["instructions"] if kind == "responses" else items[0]["content"]
        if instructions.startswith("You are the"):
            desk = instructions.split()[3]
            task = [i["content"] for i in items if i.get("role") == "user"][-1]
            round_ = next(r for r in range(rounds) if task.endswith(asked(tasks, r, desk).partition(": ")[2]))
            return reply(answer(desk, round_))
        done = sum(1 for i in items if i.get("type") == "function_call_output" or i.get("role") == "tool")
        if done >= rounds * len(FIVE):
            return reply("Trip planned.")
        desk, round_ = FIVE[done % len(FIVE)], done // len(FIVE)
        return reply(calls=[(f"call_{done}", f"ask_{desk}", json.dumps({"input": asked(tasks, round_, desk)}))])

    return script


@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_openai_agents_coordinator_asking_its_sub_agents_again_in_new_words_is_stopped(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient, kind: str
) -> None:
    upstream.script = openai_coordinator(kind, REWORDED, ROUNDS, same_answer)
    client = sdk_client(await make_proxy(), "sk-test-subagents", {"X-Run-Id": f"again-{kind}"})
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(planner(client, kind, FIVE), "Plan a trip from Lisbon to Berlin in May.", max_turns=60)
    assert caught.value.code == "runguard_non_progress"
    # Two rounds and the third's first question ran (11 turns of the coordinator, 11 desk answers); the
    # coordinator's request carrying the flights desk's third identical answer was stopped.
    assert len(upstream.received) == 22
    await eventually(lambda: any(t.detector == "non_progress" for t in trips_of(sink)))
    trip = next(t for t in trips_of(sink) if t.detector == "non_progress")
    assert trip.evidence["tool"] == "ask_flights" and trip.evidence["repeats"] == 3


@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_openai_agents_coordinator_asking_new_questions_with_new_answers_runs_to_its_end(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient, kind: str
) -> None:
    upstream.script = openai_coordinator(kind, NEW_TASKS, len(NEW_TASKS), new_answer)
    client = sdk_client(await make_proxy(), "sk-test-subagents", {"X-Run-Id": f"new-{kind}"})
    result = await Runner.run(planner(client, kind, FIVE), "Plan and book a trip.", max_turns=60)
    assert result.final_output == "Trip planned."
    assert len(requests_of(sink)) == 2 * len(NEW_TASKS) * len(FIVE) + 1
    assert not [t for t in trips_of(sink) if t.action == "block"]


# -- google-adk ------------------------------------------------------------------------------------------


def adk_coordinator(tasks: list[str], rounds: int, answer: Answer) -> Callable[[Received], Reply]:
    """ADK's coordinator asks one desk agent tool per turn, in turn, `rounds` rounds, then reports."""
    turns = itertools.count()

    def parts_reply(parts: list[dict[str, Any]]) -> Reply:
        reply = payloads.gemini_response()
        reply["candidates"][0]["content"]["parts"] = parts
        return Reply.json(reply)

    def script(received: Received) -> Reply:
        body = received.json()
        system = json.dumps(body.get("systemInstruction") or {})
        for desk in FIVE:
            if f'internal name is \\"{desk}_desk' in system:
                task = json.dumps(body["contents"])
                round_ = next(r for r in range(rounds) if asked(tasks, r, desk).partition(": ")[2] in task)
                return parts_reply([{"text": answer(desk, round_)}])
        done = next(turns)
        if done >= rounds * len(FIVE):
            return parts_reply([{"text": "Trip planned."}])
        desk, round_ = FIVE[done % len(FIVE)], done // len(FIVE)
        return parts_reply(
            [{"functionCall": {"name": f"{desk}_desk", "args": {"request": asked(tasks, round_, desk)}}}]
        )

    return script


async def adk_run(url: str, run_id: str) -> list[str]:
    config = types.GenerateContentConfig(http_options=types.HttpOptions(headers={"X-Run-Id": run_id}))
    model = Gemini(model="gemini-2.5-flash", base_url=url)
    desks = [
        AgentTool(
            LlmAgent(
                name=f"{desk}_desk",
                model=model,
                instruction=f"You are the {desk} desk.",
                description=f"Answers about {desk}.",
                generate_content_config=config,
            )
        )
        for desk in FIVE
    ]
    coordinator = LlmAgent(
        name="coordinator",
        model=model,
        instruction="You coordinate the travel desks.",
        tools=list(desks),
        generate_content_config=config,
    )
    runner = AdkRunner(agent=coordinator, app_name="runguard-desks", session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="runguard-desks", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text="Plan a trip from Lisbon to Berlin in May.")])
    return [
        part.text
        async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message)
        if event.content and event.content.parts
        for part in event.content.parts
        if part.text
    ]


@pytest.fixture
def google_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")


@pytest.mark.usefixtures("google_key")
async def test_adk_coordinator_asking_its_agent_tools_again_in_new_words_is_stopped(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    upstream.script = adk_coordinator(REWORDED, ROUNDS, same_answer)
    with pytest.raises(genai_errors.ClientError) as caught:
        await adk_run(await make_proxy(), "adk-again")
    assert caught.value.code == 429 and "non_progress" in str(caught.value)
    assert len(upstream.received) == 22


@pytest.mark.usefixtures("google_key")
async def test_adk_coordinator_asking_new_questions_with_new_answers_runs_to_its_end(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    upstream.script = adk_coordinator(NEW_TASKS, len(NEW_TASKS), new_answer)
    assert (await adk_run(await make_proxy(), "adk-new"))[-1] == "Trip planned."
    assert len(requests_of(sink)) == 2 * len(NEW_TASKS) * len(FIVE) + 1
    assert not [t for t in trips_of(sink) if t.action == "block"]


# -- agno -----------------------------------------------------------------------------------------------


def agno_leader(tasks: list[str], rounds: int, answer: Answer) -> Callable[[Received], Reply]:
    """An Agno Team's leader delegates to one desk member per turn (`delegate_task_to_member`, in turn),
    `rounds` rounds, then reports; each member answers `answer(desk, round)`."""

    def script(received: Received) -> Reply:
        messages = received.json()["messages"]
        for desk in FIVE:
            if messages[0]["content"].startswith(f"You are the {desk} desk."):
                task = messages[-1]["content"]
                round_ = next(r for r in range(rounds) if task == asked(tasks, r, desk).partition(": ")[2])
                return Reply.json(payloads.chat_completion(answer(desk, round_)))
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= rounds * len(FIVE):
            return Reply.json(payloads.chat_completion("Trip planned."))
        desk, round_ = FIVE[done % len(FIVE)], done // len(FIVE)
        args = json.dumps({"member_id": f"{desk}-desk", "task": asked(tasks, round_, desk).partition(": ")[2]})
        return Reply.json(payloads.chat_completion(tool_calls=[(f"call_{done}", "delegate_task_to_member", args)]))

    return script


async def test_agno_leader_delegating_to_its_members_again_in_new_words_is_stopped(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    """One tool for every member: the flights member's answers are counted among its own, not pooled with the
    other members' (it ran 81 requests to the end so), and its third identical answer stops the leader."""
    upstream.script = agno_leader(REWORDED, ROUNDS, same_answer)
    team = agno_team(await make_proxy(), "sk-test-agno", "agno-again", FIVE)
    stopped = await team.arun("Plan a trip from Lisbon to Berlin in May.")  # Agno answers a failed run, no raise
    assert stopped.status is RunStatus.error and "non_progress" in str(stopped.content)
    # As the coordinators above: two rounds and the third's first delegation ran (11 of the leader's requests,
    # 11 members' answers); the leader's request carrying the flights member's third identical answer was stopped.
    assert len(upstream.received) == 22
    trip = next(t for t in trips_of(sink) if t.detector == "non_progress")
    assert trip.evidence["tool"] == "delegate_task_to_member" and trip.evidence["member"] == "flights-desk"
    assert trip.evidence["repeats"] == 3


async def test_agno_leader_handing_its_members_new_tasks_runs_to_its_end(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink
) -> None:
    upstream.script = agno_leader(NEW_TASKS, len(NEW_TASKS), new_answer)
    team = agno_team(await make_proxy(), "sk-test-agno", "agno-new", FIVE)
    assert (await team.arun("Plan and book a trip.")).content == "Trip planned."
    assert len(requests_of(sink)) == 2 * len(NEW_TASKS) * len(FIVE) + 1
    assert not [t for t in trips_of(sink) if t.action == "block"]
