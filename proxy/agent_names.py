"""Names for agents the wire does not name, learned from their handoffs.

openai-agents sends no agent name: an agent is known by a fingerprint of its
instructions and tools (`agent-1a2b3c4d`), while a handoff to it names it by
its tool (`transfer_to_billing_agent`: `billing_agent`). The one place its
real name appears is the handoff's acknowledgement, `{"assistant": "Billing
Agent"}`, which the target agent's first request carries back as the
transfer's result. That request is named after it, in the handoff tool's
spelling, so the agent that speaks and the target that was handed work have
one label; and the fingerprint is remembered with the name (per API key, a
bounded table in this process), so the agent's later requests keep it.

An agent nobody has handed work to yet (the run's first agent, until it is
handed back to) keeps its fingerprint label.
"""

from __future__ import annotations

import dataclasses
import re

import orjson

from runguard.proxy.events import TRANSFER_PREFIX, AgentIdentity, RequestInfo, ToolResult

MAX_NAMES = 4096  # (key, fingerprint) pairs remembered; the table starts over when full
_ACK = '{"assistant"'
_NOT_IN_TOOL_NAMES = re.compile(r"[^a-z0-9_]")


def tool_spelling(name: str) -> str:
    """An agent name as openai-agents spells it in `transfer_to_<name>` (lowercase, `[a-z0-9_]`)."""
    return _NOT_IN_TOOL_NAMES.sub("_", name.lower())


def acknowledged(result: ToolResult) -> str | None:
    """The agent a handoff's result names (`{"assistant": "<name>"}` after `transfer_to_<name>`), if it is one."""
    if result.name is None or not result.name.startswith(TRANSFER_PREFIX) or not result.content.startswith(_ACK):
        return None
    try:
        value = orjson.loads(result.content)
    except orjson.JSONDecodeError:
        return None
    name = value.get("assistant") if isinstance(value, dict) else None
    return tool_spelling(name) if isinstance(name, str) and name.strip() else None


class AgentNames:
    """Names learned from handoff acknowledgements, by API key and agent fingerprint."""

    def __init__(self, size: int = MAX_NAMES) -> None:
        self._size = size
        self._names: dict[tuple[str, str], str] = {}

    def named(self, key_hash: str, request: RequestInfo) -> RequestInfo:
        """`request` with its agent named, when the wire gave no name but a handoff did (now or before)."""
        agent = request.agent
        if agent.name is not None:
            return request
        name = next(filter(None, map(acknowledged, reversed(request.new_results))), None)
        slot = (key_hash, agent.fingerprint)
        if name is None:
            name = self._names.get(slot)
            if name is None:
                return request
        elif self._names.get(slot) != name:
            if len(self._names) >= self._size:
                self._names.clear()
            self._names[slot] = name
        return dataclasses.replace(request, agent=AgentIdentity(name, agent.fingerprint, learned=True))
