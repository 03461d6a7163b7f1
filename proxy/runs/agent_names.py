"""Names for agents the wire does not name, learned from their handoffs.

openai-agents sends no agent name: an agent is known by a fingerprint of its
instructions and tools (`agent-1a2b3c4d`), while a handoff to it names it by
its tool (`transfer_to_billing_agent`: `billing_agent`). The one place its
real name appears is the handoff's acknowledgement, `{"assistant": "Billing
Agent"}`, which the target agent's first request carries back as the
transfer's result. That request is named after it, in the handoff tool's
spelling, so the agent that speaks and the target that was handed work have
one label; and the name is kept in the run's state under the fingerprint
(`agent.<fingerprint>`), so the agent's later requests keep it whichever
replica serves them. The op that keeps or reads it back rides in the
request's own state batch: no round trip of its own.

An agent nobody has handed work to yet (the run's first agent, until it is
handed back to) keeps its fingerprint label.
"""

from __future__ import annotations

import dataclasses
import re

from runguard.proxy.core.events import AgentIdentity, RequestInfo, ToolResult, is_transfer
from runguard.proxy.core.ops import Get, Op, OpResult, Put, Scope
from runguard.proxy.providers.common.handoffs import acknowledged_name

FIELD = "agent."  # run state: "agent.<fingerprint>" holds the name a handoff gave that agent
_NOT_IN_TOOL_NAMES = re.compile(r"[^a-z0-9_]")


def tool_spelling(name: str) -> str:
    """An agent name as openai-agents spells it in `transfer_to_<name>` (lowercase, `[a-z0-9_]`)."""
    return _NOT_IN_TOOL_NAMES.sub("_", name.lower())


def acknowledged(result: ToolResult) -> str | None:
    """The agent a handoff's result names (`{"assistant": "<name>"}` after `transfer_to_<name>`), if it is one."""
    name = acknowledged_name(result.content) if is_transfer(result.name) else None
    return tool_spelling(name) if name is not None else None


def naming(request: RequestInfo) -> tuple[str | None, Op | None]:
    """The name a handoff gives the request's agent now (None if none), and the op for the request's
    state batch that keeps that name in the run, or reads back the one an earlier handoff gave.

    No op when the wire names the agent (`X-Agent-Name`, ADK): nothing is learned then.
    """
    agent = request.agent
    if agent.name is not None:
        return None, None
    field = FIELD + agent.fingerprint
    name = next(filter(None, map(acknowledged, reversed(request.new_results))), None)
    if name is None and request.handed_to is not None:  # acknowledged in a transcript (nested handoff history)
        name = tool_spelling(request.handed_to)
    if name is None:
        return None, Get(Scope.RUN, field)
    return name, Put(Scope.RUN, field, name)


def recalled(result: OpResult) -> str | None:
    """The name the run's state gave back for the agent (the result of `naming`'s Get)."""
    return result if isinstance(result, str) and result else None


def named(request: RequestInfo, name: str | None) -> RequestInfo:
    """`request` with its agent named `name`, learned from a handoff (unchanged for None)."""
    if name is None:
        return request
    return dataclasses.replace(request, agent=AgentIdentity(name, request.agent.fingerprint, learned=True))
