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

A run named by `X-Run-Id` needs no entry to find its threads: every agent sends
the header. But its loop detectors must still judge each thread on its own (six
member tasks that each begin with the same lookup are not one agent repeating
itself). So the tasks its delegations hand out (an Agno leader's
`delegate_task_to_member`, a call of an agent tool: `adapters.agent_tools`)
are kept in the run's state (`TASKS`) and known to
each replica that relays them or reads them back (`HandedOut`); a request of
the run whose conversation starts with one of them is judged in its thread.
Other tool calls are not read for this, so the responses of header runs that
delegate nothing cost nothing more.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence

import orjson

from runguard.detectors.support import is_free_text
from runguard.proxy.core.events import RequestInfo, ToolCall, digest, is_transfer
from runguard.proxy.core.ops import Get, OpResult, Push, Scope
from runguard.proxy.runs import roots
from runguard.proxy.state import StateBackend

MAX_TASKS = 16  # texts remembered per response (a batch of parallel delegations, or of tasks created)
TASKS = "core.tasks"  # a header run's field: digests of the tasks its delegations handed out, latest last
KEEP_TASKS = 32
KNOWN_THREADS = 65_536  # (run, text) pairs a process keeps in `HandedOut`
TASKS_GET = Get(Scope.RUN, TASKS)

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


def tasks_push(texts: Sequence[str]) -> Push:
    """The op that keeps `texts` (digests, as `delegated` gives them) in a header run's `TASKS`."""
    return Push(Scope.RUN, TASKS, tuple(texts), keep=KEEP_TASKS, unique=True)


class HandedOut:
    """The conversations header runs' delegations started, as far as this process knows.

    Filled from the responses it relays and from each run's `TASKS`, read back
    with the first request of a conversation (`Guard`), so that the conversation's
    next requests are judged in their thread before their batch runs. A cache of
    the shared state: a replica that never relayed the delegation learns the
    thread from its first request. Least recently used pairs are dropped past
    `size`.
    """

    def __init__(self, size: int = KNOWN_THREADS) -> None:
        self._size = size
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()

    def started(self, run_id: str, request: RequestInfo) -> bool:
        """Whether `request`'s conversation is one its run's delegations started."""
        if not self._known:  # no header run has delegated here yet: the usual case costs nothing
            return False
        return any((run_id, text) in self._known for text in _texts_of(request))

    def learn(self, run_id: str, texts: Sequence[str]) -> None:
        for text in texts:
            self._known[(run_id, text)] = None
            self._known.move_to_end((run_id, text))
        while len(self._known) > self._size:
            self._known.popitem(last=False)

    def found(self, run_id: str, request: RequestInfo, tasks: OpResult) -> bool:
        """Whether the run's `TASKS`, as read with the request, name the request's conversation (learnt if so)."""
        if not isinstance(tasks, tuple):
            return False
        named = [text for text in _texts_of(request) if text in tasks]
        self.learn(run_id, named)
        return bool(named)


def _texts_of(request: RequestInfo) -> tuple[str, ...]:
    """The digests a conversation started with a handed-out text would carry: its first message's, and the
    task after an Agno team's context."""
    return tuple(text for text in (request.root_hash, request.task_hash) if text is not None)
