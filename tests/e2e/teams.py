"""An Agno team on the wire (wire-formats E.3), sent with the openai SDK, and a real Agno Team (`agno_team`).

The leader calls `delegate_task_to_member(member_id, task)`; the member's
requests are a conversation of their own whose user message is the task text.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any

import openai

from tests.e2e import payloads
from tests.support.upstream import Received, Reply

TASK = "Summarise the Q3 invoices for the board, in three bullet points"
LEADER = [
    {"role": "developer", "content": "You lead the finance team. Delegate with delegate_task_to_member."},
    {"role": "user", "content": "Prepare the board pack"},
]
MEMBER = [
    {"role": "developer", "content": "<your_role>\nHandles billing\n</your_role>\n\nYou do billing."},
    {"role": "user", "content": TASK},
]
DELEGATE = ("call_lead_1", "delegate_task_to_member", json.dumps({"member_id": "billing-agent", "task": TASK}))
LOOKUP = ("call_member_1", "search_invoices", json.dumps({"quarter": "Q3"}))


def team_script(received: Received) -> Reply:
    """The leader delegates once, then answers; the member looks the invoices up once, then answers."""
    messages = received.json()["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    if "You do billing." in messages[0]["content"]:
        calls = None if results else [LOOKUP]
        return Reply.json(payloads.chat_completion("Three bullets.", tool_calls=calls, usage=(100, 10)))
    calls = None if results else [DELEGATE]
    return Reply.json(payloads.chat_completion("Board pack ready.", tool_calls=calls, usage=(100, 10)))


def in_team_context(task: str) -> str:
    """The member's message when the team shares its members' interactions (Agno 3.x
    `share_member_interactions`): the context first, then the task."""
    shared = "<member_interaction_context>\nSee below interactions with other team members.\n"
    shared += "Member: research-agent\nTask: Find the Q3 figures\nResponse: Q3 revenue was 4.2M\n"
    return shared + "</member_interaction_context>\n" + "\n\n" + task


async def run_team(
    client: openai.AsyncOpenAI,
    member_headers: dict[str, str] | None = None,
    member_client: openai.AsyncOpenAI | None = None,
    member_task: Callable[[str], str] = lambda task: task,
) -> None:
    """The leader's two requests with the member's two in between, as Agno sends them (the member's
    through `member_client` when given, its message `member_task` of the task)."""
    first = await client.chat.completions.create(model="gpt-4o-mini", messages=LEADER)
    (delegation,) = first.choices[0].message.tool_calls or []
    members = member_client or client
    member: list[Any] = [MEMBER[0], {"role": "user", "content": member_task(TASK)}]
    looked_up = await members.chat.completions.create(
        model="gpt-4o-mini", messages=member, extra_headers=member_headers
    )
    member += [looked_up.choices[0].message.model_dump(exclude_none=True)]
    member.append({"role": "tool", "tool_call_id": LOOKUP[0], "content": '{"total": 1200}'})
    answer = await members.chat.completions.create(model="gpt-4o-mini", messages=member, extra_headers=member_headers)
    leader = [*LEADER, first.choices[0].message.model_dump(exclude_none=True)]
    leader.append({"role": "tool", "tool_call_id": delegation.id, "content": answer.choices[0].message.content})
    await client.chat.completions.create(model="gpt-4o-mini", messages=leader)


ANALYST = "<your_role>\nAnalyses data\n</your_role>\n\nYou analyse data."
QUESTIONS = [
    "Which region grew sales fastest last quarter?",
    "What share of costs went to cloud hosting this year?",
    "How did churn move in the enterprise segment?",
    "Which product line has the thinnest margin now?",
    "Where did support tickets pile up in October?",
    "Which suppliers raised their prices this quarter?",
]


def analyst_script(member_call: tuple[str, str], rounds: int = 1) -> Callable[[Received], Reply]:
    """The leader hands each of QUESTIONS to the analyst in turn, then answers. The analyst makes
    `member_call` (tool, arguments) `rounds` times, then answers."""

    def script(received: Received) -> Reply:
        messages = received.json()["messages"]
        done = sum(1 for m in messages if m["role"] == "tool")
        if messages[0]["content"].startswith(ANALYST):
            if done < rounds:
                call = (f"call_m{done}_{zlib.crc32(messages[1]['content'].encode())}", *member_call)  # ids differ
                return Reply.json(payloads.chat_completion(tool_calls=[call], usage=(100, 10)))
            return Reply.json(payloads.chat_completion(f"Answer to: {messages[1]['content']}", usage=(100, 10)))
        if done < len(QUESTIONS):
            args = json.dumps({"member_id": "analyst", "task": QUESTIONS[done]})
            call = (f"call_l{done}", "delegate_task_to_member", args)
            return Reply.json(payloads.chat_completion(tool_calls=[call], usage=(100, 10)))
        return Reply.json(payloads.chat_completion("All answered.", usage=(100, 10)))

    return script


def as_written(instructions: str) -> str:
    return instructions


async def run_analyst_team(
    client: openai.AsyncOpenAI, tool_result: str, instructions: Callable[[str], str] = as_written
) -> str:
    """The leader's loop over its delegations, each member thread running its own tool loop; every tool
    result of the analyst's is `tool_result`. Each request's developer message is `instructions` of the
    agent's. Returns the leader's answer."""
    leader: list[Any] = list(LEADER[1:])

    def said_by(text: str, conversation: list[Any]) -> list[Any]:
        return [{"role": "developer", "content": instructions(text)}, *conversation]

    while True:
        asked = said_by(LEADER[0]["content"], leader)
        step = (await client.chat.completions.create(model="gpt-4o-mini", messages=asked)).choices[0].message
        if not step.tool_calls:
            return step.content or ""
        leader.append(step.model_dump(exclude_none=True))
        for delegation in step.tool_calls:
            task = json.loads(delegation.function.arguments)["task"]
            member: list[Any] = [{"role": "user", "content": task}]
            while True:
                asked = said_by(ANALYST, member)
                said = (await client.chat.completions.create(model="gpt-4o-mini", messages=asked)).choices[0].message
                if not said.tool_calls:
                    break
                member.append(said.model_dump(exclude_none=True))
                member += [{"role": "tool", "tool_call_id": c.id, "content": tool_result} for c in said.tool_calls]
            leader.append({"role": "tool", "tool_call_id": delegation.id, "content": said.content})


def agno_team(url: str, api_key: str, run_id: str, desks: tuple[str, ...]) -> Any:
    """A real Agno Team (agno >= 3.1) through the proxy at `url`: a leader delegating to one member per desk
    (`<desk>-desk`, told "You are the <desk> desk.") with `delegate_task_to_member`; no retries, so a stop
    reaches the caller."""
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat
    from agno.team import Team

    def model() -> OpenAIChat:
        headers = {"X-Run-Id": run_id}
        return OpenAIChat(
            id="gpt-4o-mini", base_url=url + "/v1", api_key=api_key, default_headers=headers, max_retries=0
        )

    members = [
        Agent(name=f"{desk} desk", id=f"{desk}-desk", model=model(), instructions=f"You are the {desk} desk.")
        for desk in desks
    ]
    return Team(name="travel", members=members, model=model(), instructions="You coordinate the travel desks.")
