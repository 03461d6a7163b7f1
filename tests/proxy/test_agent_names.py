"""AgentNames: agents the wire does not name are named by the handoffs to them."""

from __future__ import annotations

from runguard.proxy.agent_names import AgentNames, acknowledged, tool_spelling
from runguard.proxy.events import AgentIdentity, Api, RequestInfo, ToolResult

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


def test_the_handed_to_agent_is_named_and_keeps_its_name_for_its_later_requests() -> None:
    names = AgentNames()
    first = names.named("k1", request(ack("Billing Agent")))
    assert first.agent == AgentIdentity("billing_agent", FINGERPRINT, learned=True)
    later = names.named("k1", request(ToolResult("lookup", "c2", "{}")))
    assert later.agent.label == "billing_agent" and later.agent.steady == "agent-abababab"
    # Another key's agent with the same instructions and tools is not named by it.
    assert names.named("k2", request()).agent.label == "agent-abababab"
    # Nor is another agent of the same key.
    assert names.named("k1", request(fingerprint="cd" * 8)).agent.name is None


def test_a_name_from_the_wire_is_kept() -> None:
    names = AgentNames()
    named = request(ack("Billing"), name="billing-from-header")
    assert names.named("k", named) is named
    assert names.named("k", request()).agent.name is None  # and nothing was learned from it


def test_the_last_handoff_of_the_tail_names_the_agent_and_a_new_one_renames_it() -> None:
    names = AgentNames()
    assert names.named("k", request(ack("Triage"), ack("Billing"))).agent.label == "billing"
    assert names.named("k", request(ack("Refunds"))).agent.label == "refunds"
    assert names.named("k", request()).agent.label == "refunds"


def test_the_table_is_bounded() -> None:
    names = AgentNames(size=2)
    for i in range(5):
        names.named("k", request(ack(f"agent{i}"), fingerprint=f"{i:016x}"))
    learned = [names.named("k", request(fingerprint=f"{i:016x}")).agent.name for i in range(5)]
    assert learned.count(None) >= 3 and learned[-1] == "agent4"
