"""Agent names: agents the wire does not name are named by the handoffs to them, kept in the run's state."""

from __future__ import annotations

from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo, ToolResult
from runguard.proxy.runs.agent_names import acknowledged, named, naming, recalled, tool_spelling
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState

FINGERPRINT = "ab" * 8


def request(*results: ToolResult, name: str | None = None, fingerprint: str = FINGERPRINT) -> RequestInfo:
    return RequestInfo(
        api=Api.RESPONSES,
        model="gpt-4o",
        stream=False,
        agent=AgentIdentity(name, fingerprint),
        new_results=results,
    )


def ack(name: str, tool: str | None = None) -> ToolResult:
    """openai-agents' result of `transfer_to_<agent>`: `json.dumps({"assistant": agent.name})`."""
    return ToolResult(tool or "transfer_to_" + tool_spelling(name), "call_h", f'{{"assistant": "{name}"}}')


def test_names_are_spelled_as_in_the_handoff_tool() -> None:
    assert tool_spelling("Billing Agent") == "billing_agent"
    assert tool_spelling("Réfunds-2") == "r_funds_2"
    assert acknowledged(ack("Billing Agent")) == "billing_agent"


def test_only_a_transfer_s_acknowledgement_names_an_agent() -> None:
    assert acknowledged(ToolResult("search", "c", '{"assistant": "Billing"}')) is None
    assert acknowledged(ToolResult("transfer_to_agent", "c", '{"result": null}')) is None  # ADK's
    assert acknowledged(ToolResult("transfer_to_x", "c", '{"assistant": 3}')) is None
    assert acknowledged(ToolResult("transfer_to_x", "c", '{"assistant": "x"')) is None
    assert acknowledged(ToolResult(None, "c", '{"assistant": "x"}')) is None


async def admitted(state: MemoryState, run: str, seen: RequestInfo) -> RequestInfo:
    """`seen` named as the guard names it: by its handoff, else by what the run's state kept."""
    acked, op = naming(seen)
    if op is None:
        return seen
    (result,) = await state.execute(ScopeIds(run, "k", "k|m", "k|d"), [op])
    return named(seen, acked if acked is not None else recalled(result))


async def test_the_handed_to_agent_is_named_and_keeps_its_name_for_its_later_requests() -> None:
    state = MemoryState()
    first = await admitted(state, "r1", request(ack("Billing Agent")))
    assert first.agent == AgentIdentity("billing_agent", FINGERPRINT, learned=True)
    later = await admitted(state, "r1", request(ToolResult("lookup", "c2", "{}")))
    assert later.agent.label == "billing_agent" and later.agent.steady == "agent-abababab" and later.agent.learned
    # Another run's agent with the same instructions and tools is not named by it.
    assert (await admitted(state, "r2", request())).agent.label == "agent-abababab"
    # Nor is another agent of the same run.
    assert (await admitted(state, "r1", request(fingerprint="cd" * 8))).agent.name is None


async def test_a_name_from_the_wire_is_kept() -> None:
    state = MemoryState()
    from_header = request(ack("Billing"), name="billing-from-header")
    assert naming(from_header) == (None, None)  # no op in the request's batch
    assert await admitted(state, "r", from_header) is from_header
    assert (await admitted(state, "r", request())).agent.name is None  # and nothing was learned from it


async def test_the_last_handoff_of_the_tail_names_the_agent_and_a_new_one_renames_it() -> None:
    state = MemoryState()
    assert (await admitted(state, "r", request(ack("Triage"), ack("Billing")))).agent.label == "billing"
    assert (await admitted(state, "r", request(ack("Refunds")))).agent.label == "refunds"
    assert (await admitted(state, "r", request())).agent.label == "refunds"
