"""Threads a waiting run started through a tool call are booked to that run (DESIGN: threads and nesting).

An agent that hands a task to another agent through a tool (an Agno team's
`delegate_task_to_member`, openai-agents' `Agent.as_tool`, ADK's `AgentTool`)
waits for the tool's result while the other agent works in a conversation of
its own, whose first user message is the task text. Without `X-Run-Id` that
conversation is keyed by its first user message like any other, so it became a
run of its own: the waiting run's budgets did not count its spend, and two
teams handing out the same task shared one member run.

So for each response of a run without `X-Run-Id`, the proxy remembers the
free-text string arguments of its tool calls (a digest each, per API key,
for as long as a run lives) as the owner of the conversations they start
(`roots`). A request without `X-Run-Id` whose conversation starts with such a
text joins the run whose call carried it, as it would have with the header;
the sub-agent's own delegations then nest under the same run.
Only exact texts match, and Agno's own wrapping: a team that shares its history
or its members' interactions puts that context before the task, and the task
after it is matched (`RequestInfo.task_hash`). A framework that wraps the task
in other text keeps a run of its own, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import orjson

from runguard.detectors.normalize import is_free_text
from runguard.proxy import roots
from runguard.proxy.events import ToolCall, digest, is_transfer
from runguard.proxy.state.base import StateBackend

MAX_TASKS = 16  # texts remembered per response (a batch of parallel delegations, or of tasks created)
MIN_CHARS = 8  # shorter strings are names and values, not tasks


def thread_id(run_id: str, root_hash: str | None, fingerprint: str) -> str:
    """The state id of a nested thread: its run's, the digest of its first user message and the agent's
    fingerprint (a broadcast hands every member the same task: each member's conversation is its own)."""
    return f"{run_id}/{root_hash}/{fingerprint}"


def delegated(calls: Sequence[ToolCall]) -> list[str]:
    """Digests of the texts these calls may have handed to another agent, as a conversation's root
    would be digested: each top-level string argument that is free text (holds whitespace).

    Each call's longest text comes first, then each call's next one: a batch of calls with a short text
    each besides the task (Agno's `create_task(title, description)` in TeamMode.tasks, five of them in
    one response) has every task remembered before any second text counts against MAX_TASKS."""
    per_call: list[list[str]] = []
    for call in calls:
        if is_transfer(call.name):
            continue  # a transfer continues the same conversation; it starts no thread
        try:
            arguments = orjson.loads(call.arguments)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(arguments, dict):
            continue
        texts = [
            value
            for value in arguments.values()
            if isinstance(value, str) and len(value) >= MIN_CHARS and is_free_text(value)
        ]
        per_call.append(sorted(texts, key=len, reverse=True))
    found: list[str] = []
    for rank in range(max(map(len, per_call), default=0)):
        for texts in per_call:
            if rank < len(texts):
                text = digest(texts[rank])
                if text not in found:
                    found.append(text)
                    if len(found) == MAX_TASKS:
                        return found
    return found


async def remember(state: StateBackend, scope: str, run_id: str, calls: Sequence[ToolCall], ttl: float) -> None:
    """Map the texts `calls` may hand to another agent (`delegated`) to `run_id` in the `roots.scope` of the
    request they answered, for `ttl` seconds.

    With a state that never waits, one after the other: a gather's tasks would hand the loop over, and
    there nothing shields the accounting from the handler's cancellation when the client leaves with its
    answer (`ProxyContext.settle`). Raises `StateUnavailable`.
    """
    names = [roots.key(scope, text) for text in delegated(calls)]
    owner = roots.dumps(roots.Owner(run_id, nested=True))
    if state.never_waits:
        for name in names:
            await state.remember(name, owner, ttl)
    else:
        await asyncio.gather(*(state.remember(name, owner, ttl) for name in names))
