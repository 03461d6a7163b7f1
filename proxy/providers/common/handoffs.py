"""Recognising calls that hand work to another agent, whatever framework made them.

- openai-agents: a tool `transfer_to_<agent name>` (one-way transfer);
- Google ADK: `transfer_to_agent` with `agent_name` (one-way transfer);
- Agno 2.x/3.x: `delegate_task_to_member(member_id, task)` and, in broadcast
  mode, `delegate_task_to_members(task)`; Agno 1.x: `transfer_task_to_member`,
  `forward_task_to_member`, `run_member_agents` (the leader waits: delegation);
- a tool that runs another agent (openai-agents' `Agent.as_tool`, ADK's
  `AgentTool`): known by its declaration in the request (`agent_tools`), so
  its calls are made delegations once the response meets its request
  (`with_agent_tools`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import orjson

from runguard.proxy.core.events import (
    DELEGATE_TO_MEMBER,
    TRANSFER_PREFIX,
    Handoff,
    HandoffKind,
    ResponseInfo,
    ToolCall,
    is_transfer,
    member_delegated_to,
)

ALL_MEMBERS = "*members*"  # the target of a broadcast to every team member
_ACK = '{"assistant"'  # how openai-agents acknowledges a transfer: `{"assistant": "<agent name>"}`

_DELEGATE_ALL = frozenset({"delegate_task_to_members", "run_member_agents"})


def _arguments(arguments: str) -> object:
    try:
        return orjson.loads(arguments) if arguments else None
    except orjson.JSONDecodeError:
        return None


def _argument(arguments: str, name: str) -> str | None:
    value = _arguments(arguments)
    found = value.get(name) if isinstance(value, dict) else None
    return found if isinstance(found, str) and found else None


def handoff_of(call: ToolCall) -> Handoff | None:
    name = call.name
    if name == "transfer_to_agent":
        target = _argument(call.arguments, "agent_name")
        return Handoff(name, target, HandoffKind.TRANSFER, call.call_id) if target else None
    if is_transfer(name):
        return Handoff(name, name[len(TRANSFER_PREFIX) :], HandoffKind.TRANSFER, call.call_id)
    if name in DELEGATE_TO_MEMBER:
        target = member_delegated_to(name, _arguments(call.arguments))
        return Handoff(name, target, HandoffKind.DELEGATE, call.call_id) if target else None
    if name in _DELEGATE_ALL:
        return Handoff(name, ALL_MEMBERS, HandoffKind.DELEGATE, call.call_id)
    return None


def acknowledged_name(output: str) -> str | None:
    """The agent a transfer's result names (`{"assistant": "Billing Agent"}`), as openai-agents wrote it."""
    if not output.startswith(_ACK):
        return None
    try:
        value = orjson.loads(output)
    except orjson.JSONDecodeError:
        return None
    name = value.get("assistant") if isinstance(value, dict) else None
    return name if isinstance(name, str) and name.strip() else None


def handoffs_of(calls: Iterable[ToolCall]) -> tuple[Handoff, ...]:
    return tuple(found for found in map(handoff_of, calls) if found is not None)


def with_agent_tools(response: ResponseInfo, agents: frozenset[str]) -> ResponseInfo:
    """`response` with its calls of the tools that run an agent (`RequestInfo.agent_tools`) as delegations
    to the tool's agent, named as the tool is."""
    if not agents:
        return response
    found = tuple(
        Handoff(call.name, call.name, HandoffKind.DELEGATE, call.call_id)
        for call in response.tool_calls
        if call.name in agents
    )
    return dataclasses.replace(response, handoffs=response.handoffs + found) if found else response
