"""Threads started by a waiting run's tool call join that run (no `X-Run-Id`), seen through the real openai SDK.

An Agno team on the wire (wire-formats E.3): the leader calls
`delegate_task_to_member(member_id, task)`, and the member's request is a new
conversation whose user message is the task text.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest

from runguard.proxy.core.events import ToolCall, digest
from runguard.proxy.core.ops import Scope
from runguard.proxy.runs import nesting, roots, tenants
from runguard.proxy.state.memory import MemoryState
from tests.conftest import ProxyFactory, SdkClient
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.e2e.teams import (
    LEADER,
    MEMBER,
    TASK,
    analyst_script,
    in_team_context,
    run_analyst_team,
    run_team,
    team_script,
)
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply


def test_a_call_s_free_text_arguments_are_digested_as_a_conversation_s_first_message_is() -> None:
    call = ToolCall("delegate_task_to_member", json.dumps({"member_id": "billing-agent", "task": TASK}))
    assert nesting.delegated([call]) == [digest(TASK)]


def test_names_ids_short_values_transfers_and_unreadable_arguments_are_not_tasks() -> None:
    calls = [
        ToolCall("read_file", json.dumps({"path": "src/handlers/users.py", "lines": 40})),
        ToolCall("lookup", json.dumps({"q": "a b"})),  # under MIN_CHARS
        ToolCall("transfer_to_billing_agent", json.dumps({"reason": "the user asks about an invoice"})),
        ToolCall("broken", '{"task": "never closed'),
        ToolCall("listing", json.dumps(["a list", "of texts"])),
    ]
    assert nesting.delegated(calls) == []


def test_a_batch_of_delegations_is_remembered_once_per_text_and_at_most_max_tasks() -> None:
    tasks = [f"research topic number {i} in depth" for i in range(nesting.MAX_TASKS + 3)]
    calls = [ToolCall("delegate_task_to_member", json.dumps({"task": t})) for t in [tasks[0], *tasks]]
    assert nesting.delegated(calls) == [digest(t) for t in tasks[: nesting.MAX_TASKS]]


@pytest.fixture
def client_of(make_proxy: ProxyFactory, sdk_client: SdkClient) -> Callable[..., Any]:
    """client_of(headers=None, **sections) -> an openai SDK client of a new proxy with those settings."""

    async def make(headers: dict[str, str] | None = None, **sections: Any) -> openai.AsyncOpenAI:
        return sdk_client(await make_proxy(**sections), "sk-team", headers)

    return make


async def test_a_member_s_thread_is_booked_to_the_leader_s_run(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    upstream.script = team_script
    await run_team(await client_of())
    await eventually(lambda: len(requests_of(sink)) == 4)
    records = requests_of(sink)
    assert len({r.run_id for r in records}) == 1
    assert [r.tool_calls for r in records] == [("delegate_task_to_member",), ("search_invoices",), (), ()]
    assert len({r.agent for r in records}) == 2  # leader and member, each speaking as itself


async def test_a_member_whose_task_follows_the_team_s_shared_context_is_booked_to_the_leader_s_run(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    """Agno's `share_member_interactions`: the member's message is the team's context, then the task."""
    upstream.script = team_script
    await run_team(await client_of(), member_task=in_team_context)
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert len({r.run_id for r in requests_of(sink)}) == 1


async def test_the_leader_s_step_limit_counts_its_members_requests(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    upstream.script = team_script
    client = await client_of(guard={"detectors": {"max_requests": {"limit": 3}}})
    with pytest.raises(openai.RateLimitError) as caught:
        await run_team(client)
    assert caught.value.code == "runguard_max_requests"
    assert len(upstream.received) == 3  # the leader's last request was answered locally


async def test_a_conversation_no_call_started_keeps_a_run_of_its_own(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    upstream.script = team_script
    client = await client_of()
    await run_team(client)
    other = [{"role": "user", "content": "Summarise the Q2 invoices for the board, in three bullet points"}]
    await client.chat.completions.create(model="gpt-4o-mini", messages=other)
    await eventually(lambda: len(requests_of(sink)) == 5)
    team, alone = requests_of(sink)[0], requests_of(sink)[4]
    assert alone.run_id != team.run_id


async def test_a_member_naming_its_own_run_keeps_it(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    upstream.script = team_script
    await run_team(await client_of(), member_headers={"X-Run-Id": "billing-own-run"})
    await eventually(lambda: len(requests_of(sink)) == 4)
    runs = [r.run_id for r in requests_of(sink)]
    assert runs[1:3] == ["billing-own-run"] * 2
    assert runs[0] == runs[3] != "billing-own-run"


async def test_a_run_named_by_its_header_lends_its_id_to_no_header_less_thread(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    """With `X-Run-Id` the user names the runs: a member sent without it is a run of its own, as before."""
    upstream.script = team_script
    client = await client_of()
    named = client.with_options(default_headers={"X-Run-Id": "team-42"})
    first = await named.chat.completions.create(model="gpt-4o-mini", messages=LEADER)
    assert first.choices[0].message.tool_calls
    await client.chat.completions.create(model="gpt-4o-mini", messages=MEMBER)
    await eventually(lambda: len(requests_of(sink)) == 2)
    leader, member = requests_of(sink)
    assert leader.run_id == "team-42" and member.run_id != "team-42"


class _SlowToRemember(MemoryState):
    """In-memory state (it never waits) that takes a while to map a response id to its run: long
    enough for a client that closes its connection the moment it has its answer to be gone by then."""

    async def remember(self, name: str, value: str, ttl: float) -> None:
        if name.startswith("resp:"):
            time.sleep(0.2)  # noqa: ASYNC251 (blocking on purpose: the client leaves meanwhile)
        await super().remember(name, value, ttl)


async def test_a_delegation_is_accounted_when_its_client_leaves_with_the_answer(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """The client closes its connection once it has the delegation (as Agno's member runs do), while the
    proxy still accounts for the response: with a state that never waits, nothing after the answer is sent
    waits on the event loop, so the server's cancellation of the handler lands after the accounting, which
    writes the record, adds the usage, gives the in-flight slot back and remembers the delegated text."""
    call = ("call_lead_1", "delegate_task_to_member", json.dumps({"member_id": "billing-agent", "task": TASK}))
    upstream.script = lambda received: Reply.json(payloads.response_object("", calls=[call]))
    state = _SlowToRemember()
    proxy = await start_proxy(settings_for(upstream.url), sink=sink, state=state)

    def delegate_and_leave() -> None:
        with openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-team", max_retries=0) as client:
            client.responses.create(model="gpt-4o-mini", input="Prepare the board pack")

    try:
        await asyncio.to_thread(delegate_and_leave)
        await eventually(lambda: len(requests_of(sink)) == 1)
        (leader,) = requests_of(sink)
        counters = await state.read_scope(Scope.RUN, tenants.state_id(leader.key_hash, leader.run_id))
        assert counters.get("core.inflight") == 0
        assert counters.get("core.out") is not None
        owner = await state.recall(roots.key(leader.key_hash, digest(TASK)))
        assert owner is not None and roots.loads(owner) == roots.Owner(leader.run_id, nested=True)
    finally:
        await proxy.stop()


async def test_every_task_of_a_batch_created_with_titles_is_nested_under_the_run(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    """Agno's TeamMode.tasks: the leader creates its tasks in one response, `create_task(title, description,
    assignee)` each, and runs them later; a member's conversation starts with its task's description."""
    work = [
        "audit the payroll ledger and flag anomalies",
        "draft a memo about the vendor contract renewals",
        "compare cloud hosting costs across regions",
        "collect customer churn numbers by segment",
        "review overdue receivables older than ninety days",
    ]
    calls = [
        (
            f"call_{i}",
            "create_task",
            json.dumps({"title": f"Job {i} {w.split()[0]}", "description": w, "assignee": "x"}),
        )
        for i, w in enumerate(work)
    ]
    upstream.script = lambda received: Reply.json(
        payloads.chat_completion("Done.", tool_calls=calls if len(received.json()["messages"]) > 1 else None)
    )
    client = await client_of()
    await client.chat.completions.create(model="gpt-4o-mini", messages=LEADER)
    for description in work:
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": description}])
    await eventually(lambda: len(requests_of(sink)) == 1 + len(work))
    assert len({r.run_id for r in requests_of(sink)}) == 1


TEAM_HEADERS = [None, {"X-Run-Id": "team-7"}]  # without the header (nested threads), and with it on every agent


@pytest.mark.parametrize("headers", TEAM_HEADERS)
async def test_member_threads_that_each_start_with_the_same_lookup_do_not_trip_the_loop_detectors(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any], headers: dict[str, str] | None
) -> None:
    """The analyst begins each of six questions with `list_tables()` and gets the same answer: six
    conversations doing one step each, not one agent repeating itself. The loop detectors judge each
    thread on its own, as they judge runs; the run's caps still count every request. Nor is the
    leader warned for handing out six tasks turn after turn: that is its work, and `handoff_cycle` is
    the one to judge it. With `X-Run-Id` on every agent, `repeat_call` stopped the 4th task."""
    upstream.script = analyst_script(("list_tables", "{}"))
    answer = await run_analyst_team(await client_of(headers), '{"tables": ["sales", "costs", "churn"]}')
    assert answer == "All answered."
    await eventually(lambda: len(requests_of(sink)) == 19)
    records = requests_of(sink)
    assert len({r.run_id for r in records}) == 1
    assert [t.detector for t in trips_of(sink)] == []  # six tasks for one member: a fan-out, warned of by nothing


async def test_a_team_whose_instructions_carry_the_time_is_one_leader_and_one_member(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    """Agno's `add_datetime_to_context` puts the current time in every agent's instructions. Read as a new agent
    at every request, the leader never came back from a delegation, and its 6th delegation looked 6 agents
    deep to `delegation`."""

    def stamped(instructions: str) -> str:
        return f"{instructions}\n<additional_information>\n- The current time is {datetime.datetime.now()}.\n"

    upstream.script = analyst_script(("list_tables", "{}"))
    answer = await run_analyst_team(await client_of(), '{"tables": ["sales"]}', instructions=stamped)
    assert answer == "All answered."
    await eventually(lambda: len(requests_of(sink)) == 19)
    assert len({r.agent for r in requests_of(sink)}) == 2
    assert [t.detector for t in trips_of(sink)] == []


@pytest.mark.parametrize("headers", TEAM_HEADERS)
async def test_a_member_looping_on_a_failing_tool_is_stopped_and_stops_its_run(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any], headers: dict[str, str] | None
) -> None:
    upstream.script = analyst_script(("run_sql", json.dumps({"sql": "select region, sum(x) from sales"})), rounds=99)
    client = await client_of(headers)
    with pytest.raises(openai.RateLimitError) as caught:
        await run_analyst_team(client, '{"error": "relation sales is locked, try again"}')
    assert caught.value.code == "runguard_non_progress"
    with pytest.raises(openai.RateLimitError):  # the leader's run is stopped with it
        await client.chat.completions.create(model="gpt-4o-mini", messages=LEADER)
    blocked = [r for r in requests_of(sink) if r.blocked_by]
    assert {r.run_id for r in blocked} == {requests_of(sink)[0].run_id}


async def test_a_task_broadcast_to_every_member_gives_each_member_a_thread_of_its_own(
    upstream: FakeUpstream, sink: ListSink, client_of: Callable[..., Any]
) -> None:
    """Agno's broadcast (`delegate_task_to_members`): every member gets the same task text, and each one
    begins with the same lookup; three conversations, not one repeating itself."""
    task = "Review the vendor contract for risks in your area"
    lookup = ("get_contract", json.dumps({"contract_id": "V-1009"}))

    def script(received: Received) -> Reply:
        messages = received.json()["messages"]
        if messages[0]["content"] == LEADER[0]["content"]:
            broadcast = ("call_all", "delegate_task_to_members", json.dumps({"task": task}))
            return Reply.json(payloads.chat_completion(tool_calls=[broadcast]))
        looked = any(m["role"] == "tool" for m in messages)
        call = (f"call_{len(upstream.received)}", *lookup)  # call ids differ, as a model's do
        return Reply.json(payloads.chat_completion(f"{messages[0]['content']}: fine", None if looked else [call]))

    upstream.script = script
    client = await client_of()
    await client.chat.completions.create(model="gpt-4o-mini", messages=LEADER)
    for area in ("legal", "finance", "security"):
        member: list[Any] = [{"role": "developer", "content": f"You review {area}."}, {"role": "user", "content": task}]
        said = (await client.chat.completions.create(model="gpt-4o-mini", messages=member)).choices[0].message
        (looked_up,) = said.tool_calls or []
        member += [said.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": looked_up.id, "content": "{}"}]
        await client.chat.completions.create(model="gpt-4o-mini", messages=member)
    await eventually(lambda: len(requests_of(sink)) == 7)
    assert len({r.run_id for r in requests_of(sink)}) == 1
    assert [t.detector for t in trips_of(sink)] == []
