"""Whether an agent was asked the same thing again: a task kept as its words, and two tasks compared.

A coordinator asking a sub-agent again in other words ("find the cheapest flights Lisbon to Berlin in
May", "search again for the cheapest Lisbon to Berlin flights in May") asks the same; one handing it
another task ("book the option the traveller picked: TP552") asks something new, even when the sub-agent
answers the same. `asked_entry` keeps a task as the words of its arguments (`sketch.call_sketch`) and what
they name (`sketch.call_targets`), or, for a call without words, as its arguments' digest;
`asked_alike` tells whether two kept tasks ask the same: their words' similarity reaches `ALIKE` (a
reworded task keeps 0.5-0.7 of its words, a new one 0-0.3) and they name nothing apart, or, without
words, their arguments are the same.

An Agno leader asks every member through one tool (`delegate_task_to_member(member_id, task)`): `asked_agent`
names the agent a call asks (the tool, or the tool and the member, so each member's answers are counted apart),
and a task kept is its words without the member's id.
"""

from __future__ import annotations

import orjson

from runguard.detectors.support.normalize import call_args_digest, call_json
from runguard.detectors.support.sketch import (
    call_asks_in_words,
    call_sketch_packed,
    call_targets,
    decode_sketch,
    named_apart,
    sketch_similarity,
)
from runguard.proxy.core.events import ToolCall, member_delegated_to

ALIKE = 0.5


def member_of(call: ToolCall) -> str | None:
    """The Agno team member `call` delegates to (`member_delegated_to`), None for any other call."""
    return member_delegated_to(call.name, call_json(call))


def asked_agent(call: ToolCall, agent_tools: frozenset[str]) -> str | None:
    """The agent `call` asks: an agent tool's name, "<tool>@<member>" for an Agno leader's delegation to one
    member; None for a call that asks no agent."""
    member = member_of(call)
    if member is not None:
        return f"{call.name}@{member}"
    return call.name if call.name in agent_tools else None


def _task_of(call: ToolCall) -> ToolCall:
    """A delegation to a member without the member's id (whom it asks is `asked_agent`'s); any other call."""
    arguments = call_json(call)
    if member_of(call) is None or not isinstance(arguments, dict):
        return call
    task = {key: value for key, value in arguments.items() if key != "member_id"}
    return ToolCall(call.name, orjson.dumps(task).decode(), call.call_id, call.index)


def asked_entry(call: ToolCall) -> str:
    """A task as kept: "<names>/<packed sketch>" when it asks in words, else "=<arguments' digest>"."""
    call = _task_of(call)
    if not call_asks_in_words(call):
        return f"={call_args_digest(call)}"
    return f"{call_targets(call)}/{call_sketch_packed(call)}"


def asked_alike(first: str, second: str) -> bool:
    """Whether two kept tasks (`asked_entry`) ask the same thing."""
    if first.startswith("=") or second.startswith("="):
        return first == second
    names, _, sketch = first.partition("/")
    other_names, _, other_sketch = second.partition("/")
    if named_apart(names, other_names):
        return False
    return sketch_similarity(decode_sketch(sketch), decode_sketch(other_sketch)) >= ALIKE
