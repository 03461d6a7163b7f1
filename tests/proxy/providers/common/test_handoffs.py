"""Handoff recognition for openai-agents, Google ADK and Agno (1.x to 3.x)."""

from __future__ import annotations

import pytest

from runguard.proxy.core.events import Handoff, HandoffKind, ToolCall
from runguard.proxy.providers.common.handoffs import ALL_MEMBERS, handoff_of, handoffs_of

TRANSFER, DELEGATE = HandoffKind.TRANSFER, HandoffKind.DELEGATE


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("transfer_to_billing_agent", "{}", ("billing_agent", TRANSFER)),
        ("transfer_to_billing_agent", "", ("billing_agent", TRANSFER)),
        ("transfer_to_agent", '{"agent_name": "billing_agent"}', ("billing_agent", TRANSFER)),
        ("delegate_task_to_member", '{"member_id": "billing-agent", "task": "Refund"}', ("billing-agent", DELEGATE)),
        (
            "transfer_task_to_member",
            '{"member_id": "billing-agent", "task_description": "x"}',
            ("billing-agent", DELEGATE),
        ),
        ("forward_task_to_member", '{"member_id": "support-agent"}', ("support-agent", DELEGATE)),
        ("delegate_task_to_members", '{"task": "everyone look"}', (ALL_MEMBERS, DELEGATE)),
        ("run_member_agents", '{"task_description": "x"}', (ALL_MEMBERS, DELEGATE)),
    ],
)
def test_recognised(name: str, arguments: str, expected: tuple[str, HandoffKind]) -> None:
    found = handoff_of(ToolCall(name, arguments, "call_1"))
    assert found == Handoff(name, expected[0], expected[1], "call_1")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("get_weather", '{"city": "Paris"}'),
        ("transfer_to_", "{}"),
        ("transfer_to_agent", "{}"),  # ADK without a target names no one
        ("transfer_to_agent", '{"agent_name": ""}'),
        ("transfer_to_agent", '{"agent_name": 7}'),
        ("transfer_to_agent", '{"agent_name": "billing_agent"'),  # truncated arguments
        ("transfer_to_agent", '["billing_agent"]'),
        ("delegate_task_to_member", '{"task": "no member"}'),
        ("delegate_task_to_member", "not json"),
        ("delegate_task_to_member", "\udcff"),
        ("delegate_task_to_member", "[" * 5000 + "]" * 5000),
        ("", ""),
    ],
)
def test_not_a_handoff(name: str, arguments: str) -> None:
    assert handoff_of(ToolCall(name, arguments)) is None


def test_handoffs_of_keeps_order_and_skips_plain_calls() -> None:
    calls = [
        ToolCall("lookup_order", '{"order_id": "1"}', "a"),
        ToolCall("transfer_to_support_agent", "{}", "b", 1),
        ToolCall("transfer_to_agent", '{"agent_name": "billing_agent"}', "c", 2),
    ]
    assert [(h.target, h.call_id) for h in handoffs_of(calls)] == [("support_agent", "b"), ("billing_agent", "c")]
    assert handoffs_of([]) == ()
