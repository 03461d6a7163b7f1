"""Run identification on its own: roots claimed, found, raced and started over; continuations in their tenant;
threads nested in the run that handed out their task; agents named by handoffs; and a state that fails.

`RunIdentity` over the in-memory state; time is the `now` each call is given (and the state's own clock).
"""

from __future__ import annotations

import json

import pytest

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.events import (
    AgentIdentity,
    Api,
    Handoff,
    HandoffKind,
    RequestInfo,
    ResponseInfo,
    ToolCall,
    ToolResult,
    digest,
)
from runguard.proxy.core.ops import Get, Put, Scope
from runguard.proxy.runs import nesting, roots, tenants
from runguard.proxy.runs.identity import RunIdentity
from runguard.proxy.state.memory import MemoryState

IDLE = 600.0  # runs.idle_seconds
INFERRED = 60.0  # runs.inferred_idle_seconds
KEY, OTHER_KEY, TEAM_KEY = "k_alpha", "k_beta", "k_gamma"
ROOT = digest("Triage the new tickets in the inbox")
TASK = "Summarise the overdue invoices of the billing account"
AGENT = AgentIdentity(None, "f1ngerpr1nt")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def ask(root: str | None = ROOT, **fields: object) -> RequestInfo:
    return RequestInfo(Api.CHAT, "gpt-4o-mini", False, fields.pop("agent", AGENT), root_hash=root, **fields)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state(clock: Clock) -> MemoryState:
    return MemoryState(clock=clock)


@pytest.fixture
def errors() -> list[str]:
    return []


@pytest.fixture
def runs(state: MemoryState, errors: list[str]) -> RunIdentity:
    return _identity(state, errors)


def _identity(state: MemoryState, errors: list[str]) -> RunIdentity:
    return RunIdentity(
        state,
        idle_seconds=IDLE,
        inferred_idle_seconds=INFERRED,
        groups={"team": [TEAM_KEY, OTHER_KEY]},
        on_state_error=lambda: errors.append("state"),
    )


class FailingState(MemoryState):
    """Every entry read or written fails, as while Redis is down."""

    async def recall(self, name: str) -> str | None:
        raise StateUnavailable("down (test)")

    async def remember(self, name: str, value: str, ttl: float) -> None:
        raise StateUnavailable("down (test)")


class RacedState(MemoryState):
    """A concurrent first request (another replica) claims each root the moment before this one does."""

    async def claim(self, name: str, ttl: float, value: str = "1") -> bool:
        await super().claim(name, ttl, roots.dumps(roots.Owner("r-theirs", since=1.0)))
        return await super().claim(name, ttl, value)


# -- roots ------------------------------------------------------------------------------------------


async def test_a_root_s_first_request_claims_a_run_and_its_next_requests_find_it(
    runs: RunIdentity, state: MemoryState, clock: Clock
) -> None:
    first = await runs.find(None, KEY, ask(), clock.now)
    assert first.run_id == roots.new_run(KEY, ROOT, clock.now).run_id
    assert first.own is not None and not first.nested and first.tenant == KEY
    assert await state.recall(roots.key(KEY, ROOT)) == roots.dumps(first.own)
    clock.now += 5
    later = await runs.find(None, KEY, ask(assistant_turns=1), clock.now)
    assert later.run_id == first.run_id and later.own == first.own


async def test_a_root_claimed_by_a_concurrent_first_request_is_that_request_s_run(errors: list[str]) -> None:
    runs = _identity(RacedState(), errors)
    found = await runs.find(None, KEY, ask(), 5.0)
    assert found.run_id == "r-theirs"


async def test_the_same_root_under_two_keys_or_two_end_users_is_two_runs(runs: RunIdentity, clock: Clock) -> None:
    mine = await runs.find(None, KEY, ask(), clock.now)
    theirs = await runs.find(None, OTHER_KEY, ask(), clock.now)
    user = await runs.find(None, KEY, ask(end_user="u-1"), clock.now)
    assert len({mine.run_id, theirs.run_id, user.run_id}) == 3


async def test_a_header_run_is_the_run_and_no_root_is_read_or_claimed(runs: RunIdentity, state: MemoryState) -> None:
    found = await runs.find("nightly-42", KEY, ask(), 1.0)
    assert (found.run_id, found.own, found.nested) == ("nightly-42", None, False)
    assert found.state_run == tenants.state_id(KEY, "nightly-42")
    assert await state.recall(roots.key(KEY, ROOT)) is None


# -- idle restarts ----------------------------------------------------------------------------------


async def test_a_root_that_starts_over_after_an_idle_pause_is_a_new_run_its_next_requests_find(
    runs: RunIdentity, clock: Clock
) -> None:
    first = await runs.find(None, KEY, ask(), clock.now)
    last_seen, clock.now = clock.now, clock.now + INFERRED + 1
    again = await runs.find(None, KEY, ask(), clock.now)
    fresh = await runs.starts_over(again, clock.now, last_seen, lambda: 1)
    assert fresh is not None and fresh != first.run_id
    assert again.again(fresh).run_id == fresh
    clock.now += 1
    assert (await runs.find(None, KEY, ask(assistant_turns=1), clock.now)).run_id == fresh


@pytest.mark.parametrize(
    ("pause", "in_flight", "turns"),
    [(INFERRED - 1, 1, 0), (INFERRED + 1, 2, 0), (INFERRED + 1, 1, 1)],
    ids=["not-idle-long-enough", "another-request-in-flight", "a-conversation-going-on"],
)
async def test_a_root_stays_in_its_run_unless_it_starts_over_idle_with_nothing_in_flight(
    runs: RunIdentity, clock: Clock, pause: float, in_flight: int, turns: int
) -> None:
    first = await runs.find(None, KEY, ask(), clock.now)
    last_seen, clock.now = clock.now, clock.now + pause
    again = await runs.find(None, KEY, ask(assistant_turns=turns), clock.now)
    assert await runs.starts_over(again, clock.now, last_seen, lambda: in_flight) is None
    assert (await runs.find(None, KEY, ask(), clock.now)).run_id == first.run_id


async def test_a_run_s_root_entry_is_written_again_once_it_is_half_an_idle_time_old(
    runs: RunIdentity, state: MemoryState, clock: Clock
) -> None:
    first = await runs.find(None, KEY, ask(), clock.now)
    clock.now += IDLE / 2 + 1
    again = await runs.find(None, KEY, ask(assistant_turns=2), clock.now)
    assert await runs.starts_over(again, clock.now, clock.now - 1, lambda: 1) is None
    assert await state.recall(roots.key(KEY, ROOT)) == roots.dumps(roots.Owner(first.run_id, since=clock.now))


# -- continuations and tenants ----------------------------------------------------------------------


async def test_a_continuation_finds_its_run_and_its_calls_names_within_its_tenant_only(runs: RunIdentity) -> None:
    call = ToolCall("lookup_order", '{"order": 7}', "call_7")
    await runs.remember_response(runs.tenants.of(TEAM_KEY), "resp_1", "run-team", [call], None)
    follow = ask(previous_response_id="resp_1", new_results=(ToolResult(None, "call_7", "shipped"),))
    same_team = await runs.find(None, OTHER_KEY, follow, 1.0)  # another key of the same tenant
    assert same_team.run_id == "run-team" and same_team.tenant == "team"
    assert same_team.request.new_results[0].name == "lookup_order"
    assert same_team.request.prior_calls[0].call_id == "call_7"
    stranger = await runs.find(None, KEY, follow, 1.0)
    assert stranger.run_id != "run-team" and stranger.request.new_results[0].name is None


async def test_a_continuation_keeps_the_run_its_header_names(runs: RunIdentity) -> None:
    await runs.remember_response(KEY, "resp_2", "run-earlier", [], None)
    found = await runs.find("run-named", KEY, ask(previous_response_id="resp_2"), 1.0)
    assert found.run_id == "run-named"


# -- nesting --------------------------------------------------------------------------------------


async def test_a_conversation_a_run_s_tool_call_handed_its_task_to_is_a_thread_of_that_run(runs: RunIdentity) -> None:
    call = ToolCall("delegate_task_to_member", json.dumps({"member_id": "billing", "task": TASK}), "call_1")
    await runs.remember_tasks(KEY, None, "r-leader", [call])
    member = await runs.find(None, KEY, ask(digest(TASK)), 2.0)
    assert (member.run_id, member.nested, member.own) == ("r-leader", True, None)
    assert member.thread == nesting.thread_id(tenants.state_id(KEY, "r-leader"), digest(TASK), AGENT.fingerprint)
    assert not member.asks_tasks


async def test_a_header_run_s_delegation_puts_its_member_s_conversation_in_a_thread(
    runs: RunIdentity, state: MemoryState, errors: list[str]
) -> None:
    call = ToolCall("delegate_task_to_member", json.dumps({"member_id": "billing", "task": TASK}), "call_1")
    delegating = ResponseInfo(
        tool_calls=(call,), handoffs=(Handoff(call.name, "billing", HandoffKind.DELEGATE, "call_1"),)
    )
    leader = await runs.find("run-h", KEY, ask(), 1.0)
    assert runs.handing_out(leader.state_run, True, delegating) == []  # a run without the header uses roots
    (push,) = runs.handing_out(leader.state_run, False, delegating)
    assert push == nesting.tasks_push([digest(TASK)])
    member = await runs.find("run-h", KEY, ask(digest(TASK)), 2.0)
    assert member.nested and member.thread.startswith(leader.state_run + "/")
    # Another replica learns the thread from the run's tasks, read with the member's first batch.
    elsewhere = _identity(state, errors)
    first = await elsewhere.find("run-h", KEY, ask(digest(TASK)), 3.0)
    assert not first.nested and first.asks_tasks
    assert elsewhere.thread_found(first, (digest(TASK),)) == member.thread
    assert _identity(state, errors).thread_found(first, ()) is None  # tasks that do not name it: no thread
    assert (await elsewhere.find("run-h", KEY, ask(digest(TASK), assistant_turns=1), 4.0)).nested


async def test_a_response_that_delegates_nothing_hands_out_nothing(runs: RunIdentity) -> None:
    plain = ResponseInfo(tool_calls=(ToolCall("search", '{"q": "overdue invoices please"}', "c"),))
    assert runs.handing_out("t/run", False, plain) == []


# -- agent names ----------------------------------------------------------------------------------


async def test_a_handoff_s_acknowledgement_names_its_agent_and_the_name_is_kept_in_the_run(runs: RunIdentity) -> None:
    ack = ToolResult("transfer_to_billing_agent", "c1", json.dumps({"assistant": "Billing Agent"}))
    named = await runs.find("run-a", KEY, ask(new_results=(ack,)), 1.0)
    assert named.request.agent.name == "billing_agent"
    assert named.naming == Put(Scope.RUN, "agent." + AGENT.fingerprint, "billing_agent")
    assert named.recalled("billing_agent") is None  # named already: nothing to read back
    later = await runs.find("run-a", KEY, ask(), 2.0)
    assert later.naming == Get(Scope.RUN, "agent." + AGENT.fingerprint)
    renamed = later.recalled("billing_agent")
    assert renamed is not None and renamed.agent.name == "billing_agent" and renamed.agent.learned
    assert later.recalled(None) is None


# -- a state that fails ----------------------------------------------------------------------------


async def test_a_state_that_fails_gives_every_replica_the_same_fallback_run_and_is_counted(
    errors: list[str],
) -> None:
    runs = _identity(FailingState(), errors)
    found = await runs.find(None, KEY, ask(previous_response_id="resp_gone"), 1.0)
    assert found.run_id == roots.fallback_run(KEY, ROOT) and found.own is None
    assert errors == ["state"]  # the root's read (a continuation's failed read is not counted)
    await runs.remember_response(KEY, "resp_3", found.run_id, [], None)
    await runs.remember_tasks(KEY, None, found.run_id, [ToolCall("delegate", json.dumps({"task": TASK}))])
    assert errors == ["state"] * 3


async def test_a_root_entry_that_cannot_be_rewritten_keeps_the_run(errors: list[str], clock: Clock) -> None:
    state = MemoryState(clock=clock)
    runs = _identity(state, errors)
    first = await runs.find(None, KEY, ask(), clock.now)

    async def down(name: str, value: str, ttl: float) -> None:
        raise StateUnavailable("down (test)")

    state.remember = down  # type: ignore[method-assign]
    last_seen, clock.now = clock.now, clock.now + INFERRED + 1
    again = await runs.find(None, KEY, ask(), clock.now)
    assert await runs.starts_over(again, clock.now, last_seen, lambda: 1) is None
    assert errors == ["state"]
    assert again.run_id == first.run_id


# -- sessions -------------------------------------------------------------------------------------

SESSION, OTHER_SESSION = digest("session-a", 16), digest("session-b", 16)


async def test_two_sessions_whose_conversations_open_alike_are_two_runs(runs: RunIdentity, clock: Clock) -> None:
    """codex opens every conversation in one directory with the same `<environment_context>`: the session,
    not the first message, tells them apart."""
    one = await runs.find(None, KEY, ask(session=SESSION), clock.now)
    two = await runs.find(None, KEY, ask(session=OTHER_SESSION), clock.now)
    plain = await runs.find(None, KEY, ask(), clock.now)
    assert len({one.run_id, two.run_id, plain.run_id}) == 3
    assert one.own is not None and not one.nested


async def test_a_session_s_conversations_are_one_run_that_does_not_start_over_after_a_pause(
    runs: RunIdentity, clock: Clock
) -> None:
    first = await runs.find(None, KEY, ask(session=SESSION), clock.now)
    side = await runs.find(None, KEY, ask(digest("Write a title for this chat"), session=SESSION), clock.now)
    assert side.run_id == first.run_id
    last_seen, clock.now = clock.now, clock.now + INFERRED + 1
    again = await runs.find(None, KEY, ask(session=SESSION), clock.now)
    assert await runs.starts_over(again, clock.now, last_seen, lambda: 1) is None
    assert again.run_id == first.run_id


async def test_one_tenant_naming_another_s_session_gets_a_run_of_its_own(runs: RunIdentity, clock: Clock) -> None:
    """A session id is the client's word: it is looked up within the key's tenant only."""
    mine = await runs.find(None, KEY, ask(session=SESSION), clock.now)
    theirs = await runs.find(None, OTHER_KEY, ask(session=SESSION), clock.now)
    assert mine.run_id != theirs.run_id and theirs.tenant == "team"
    teammate = await runs.find(None, TEAM_KEY, ask(session=SESSION), clock.now)
    assert teammate.run_id == theirs.run_id  # the keys of one tenant share their sessions


async def test_a_task_handed_out_in_a_session_is_a_thread_of_the_session_s_run(runs: RunIdentity) -> None:
    leader = await runs.find(None, KEY, ask(session=SESSION), 1.0)
    call = ToolCall("Task", json.dumps({"description": "invoices", "prompt": TASK}), "call_1")
    await runs.remember_tasks(KEY, None, leader.run_id, [call], SESSION)
    member = await runs.find(None, KEY, ask(digest(TASK), session=SESSION), 2.0)
    assert (member.run_id, member.nested) == (leader.run_id, True)
    stranger = await runs.find(None, KEY, ask(digest(TASK), session=OTHER_SESSION), 2.0)
    assert stranger.run_id != leader.run_id and not stranger.nested


async def test_a_session_s_fallback_run_is_the_session_s_whatever_its_first_message(errors: list[str]) -> None:
    runs = _identity(FailingState(), errors)
    one = await runs.find(None, KEY, ask(session=SESSION), 1.0)
    side = await runs.find(None, KEY, ask(digest("Write a title"), session=SESSION), 1.0)
    other = await runs.find(None, KEY, ask(session=OTHER_SESSION), 1.0)
    assert one.run_id == side.run_id != other.run_id
