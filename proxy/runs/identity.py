"""Which run a request belongs to, and what it leaves behind for the requests after it.

The guard asks one object, `RunIdentity`, everything about a request's run,
so that gating, accounting and recording (`Guard`) never read a root entry or
a continuation themselves:

- the run: a header's (`X-Run-Id`), the run of the response a
  `previous_response_id` continues (`continuation`), or the run its
  conversation's root belongs to (`roots`: claimed by the root's first
  request, found by the others, started over after an idle pause; the session
  the client names, where it names one, roots it before its first user
  message), or the run
  whose tool call handed the conversation its task (`nesting`);
- the tenant whose state holds it (`tenants`), and the thread nested in it the
  request is judged in (`nesting.thread_id`);
- the agent's name a handoff gave it (`agent_names`);
- and, once the response is in, the entries that let the next requests find
  the same run: the response id's continuation, the texts its tool calls hand
  out (as root entries, or as a header run's `TASKS`).

Everything is read from and written to the state backend it is given; a state
that does not answer never fails a request: the run falls back to one every
replica agrees on (`roots.fallback_run`), and what could not be remembered is
counted (`on_state_error`) and forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.events import HandoffKind, RequestInfo, ResponseInfo, ToolCall
from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.ops import Op, OpResult
from runguard.proxy.runs import agent_names, continuation, nesting, roots, tenants
from runguard.proxy.runs.roots import Owner
from runguard.proxy.state import StateBackend

log = logging.getLogger("runguard.guard")


@frozen
class Found:
    """A request's run, as `RunIdentity.find` found it before the request's state batch runs."""

    run_id: str  # the run id users see (header, records, CLI)
    tenant: str  # whose state the run lives in (`tenants`)
    request: RequestInfo  # names filled from a continued response, the agent named by a handoff now
    header_run: str | None  # the `X-Run-Id` the request sent
    nested: bool  # judged in a thread of its run (a conversation a delegation started)
    own: Owner | None = None  # the root entry of a run found by its root, which may start over (`roots`)
    acked: str | None = None  # the name a handoff's acknowledgement gives the agent now
    naming: Op | None = None  # the op (last in the batch) that keeps that name, or reads back an earlier one

    @property
    def state_run(self) -> str:
        """The run's id in the state: its tenant's (`tenants.state_id`)."""
        return tenants.state_id(self.tenant, self.run_id)

    @property
    def thread(self) -> str:
        """The state id of the thread the request is judged in ("" when it is judged in its run)."""
        if not self.nested:
            return ""
        return nesting.thread_id(self.state_run, self.request.root_hash, self.request.agent.fingerprint)

    @property
    def asks_tasks(self) -> bool:
        """Whether the request reads its run's delegated tasks (`nesting.TASKS`) with its batch: the first
        request of a conversation in a header run, when this process does not know it for a thread already.
        Its conversation's next requests are then known here; a replica that serves none of its first
        requests judges the thread's requests in the run's scope."""
        return self.header_run is not None and not self.nested and self.request.assistant_turns == 0

    def again(self, run_id: str) -> Found:
        """The same request in another run (its root started over: `RunIdentity.starts_over`)."""
        return Found(run_id, self.tenant, self.request, self.header_run, self.nested, self.own, self.acked, self.naming)

    def recalled(self, naming_result: OpResult) -> RequestInfo | None:
        """The request with its agent named as the run's state recalled (the result of `naming`'s read);
        None when there is nothing to rename."""
        if self.acked is not None or self.naming is None:
            return None
        name = agent_names.recalled(naming_result)
        return agent_names.named(self.request, name) if name is not None else None


class RunIdentity:
    """Finds each request's run and keeps what lets the next requests find it (see the module docstring).

    `idle_seconds`: how long a run's entries live (`runs.idle_seconds`);
    `inferred_idle_seconds`: the pause after which a root that starts over is a new run;
    `groups`: `runs.tenants`; `on_state_error`: told of each state failure it swallows.
    """

    def __init__(
        self,
        state: StateBackend,
        *,
        idle_seconds: float,
        inferred_idle_seconds: float,
        groups: Mapping[str, Sequence[str]],
        on_state_error: Callable[[], None] = lambda: None,
    ) -> None:
        self._state = state
        self._idle = idle_seconds
        self._inferred_idle = inferred_idle_seconds
        self._owner_ttl = idle_seconds * roots.OWNER_TTL_RUNS
        self._state_error = on_state_error
        self._handed = nesting.HandedOut()  # the conversations header runs' delegations started
        self.tenants = tenants.Tenants(groups)

    # -- before the request's batch --------------------------------------------------------------

    async def find(self, header_run: str | None, key_hash: str, request: RequestInfo, now: float) -> Found:
        """The request's run, in its key's tenant, and the request as its run knows it."""
        tenant = self.tenants.of(key_hash)
        run_id, request, owner = await self._resolve(header_run, tenant, request, now)
        # A handoff's acknowledgement names its target now; a name learned before is read back with
        # the run's state (the last op of the batch), whichever replica learned it.
        acked, naming = agent_names.naming(request)
        request = agent_names.named(request, acked)
        threaded = header_run is not None and self._handed.started(tenants.state_id(tenant, run_id), request)
        nested = threaded or (owner is not None and owner.nested)
        own = None if nested else owner
        return Found(run_id, tenant, request, header_run, nested, own, acked, naming)

    async def _resolve(
        self, header_run: str | None, tenant: str, request: RequestInfo, now: float
    ) -> tuple[str, RequestInfo, Owner | None]:
        """The run id, the request with tool-result names filled from a previous response, and the
        root's owner when the run was found by the conversation's root."""
        run_id = header_run
        if request.previous_response_id:
            try:
                remembered = await self._state.recall(continuation.entry(tenant, request.previous_response_id))
            except StateUnavailable:
                remembered = None
            if remembered is not None:
                known_run, calls = continuation.loads(remembered)
                run_id = run_id or known_run
                request = continuation.fill_names(request, calls)
        if run_id:
            return run_id, request, None
        scope = roots.scope(tenant, request.end_user, request.session)
        owner = await self._owner(scope, request, now)
        if owner is None:  # the state does not answer
            return roots.fallback_run(scope, roots.root_of(request.root_hash, request.session)), request, None
        return owner.run_id, request, owner

    async def _owner(self, scope: str, request: RequestInfo, now: float) -> Owner | None:
        """The run the request's root belongs to in its `roots.scope`; a new one if it belongs to none
        (None: the state failed)."""
        root_hash = roots.root_of(request.root_hash, request.session)
        name = roots.key(scope, root_hash)
        try:
            if request.session is not None:  # a sub-agent's thread in a session is found by its own root
                thread = await self._state.recall(roots.key(scope, request.root_hash))
                owner = roots.loads(thread) if thread is not None else None
                if owner is not None and owner.nested:
                    return owner
            found = await self._state.recall(name)
            if found is None and request.task_hash is not None:  # an Agno member's task in the team's context
                handed = await self._state.recall(roots.key(scope, request.task_hash))
                owner = roots.loads(handed) if handed is not None else None
                if owner is not None and owner.nested:
                    return owner
            if found is None:
                owner = roots.new_run(scope, root_hash, now)
                if await self._state.claim(name, self._owner_ttl, roots.dumps(owner)):
                    return owner
                found = await self._state.recall(name)  # a concurrent first request took it
        except StateUnavailable:
            self._state_error()
            return None
        return roots.loads(found) if found is not None else None

    # -- with the request's batch results --------------------------------------------------------

    def thread_found(self, found: Found, tasks: OpResult) -> str | None:
        """The thread a header run's request is judged in from its response on, when its conversation is one
        its run's delegations started (`tasks`: `nesting.TASKS` as read with its batch); else None."""
        request = found.request
        if not self._handed.found(found.state_run, request, tasks):
            return None
        return nesting.thread_id(found.state_run, request.root_hash, request.agent.fingerprint)

    async def starts_over(self, found: Found, now: float, last_seen: float, in_flight: Callable[[], int]) -> str | None:
        """For a run found by its root (`found.own`): the id of the new run the request starts, if its
        conversation starts again (no assistant turn yet) after the run has been idle for
        `inferred_idle_seconds` with nothing else in flight (`in_flight`: the run's requests in flight,
        this one counted); a new invocation, not the same run's retry or its user back from a pause.
        Else None, the root's entry written again if it is due (`roots`). A session's run never starts over:
        a new invocation comes with a new session."""
        own, request = found.own, found.request
        if own is None:
            return None
        scope = roots.scope(found.tenant, request.end_user, request.session)
        root = roots.root_of(request.root_hash, request.session)
        idle = now - last_seen
        pause = last_seen > 0 and idle > self._inferred_idle and request.session is None
        if request.assistant_turns == 0 and pause and in_flight() == 1:
            fresh = roots.new_run(scope, root, now)
            if await self._rewrite(scope, root, fresh):
                log.info("run %s was idle %.0f s: its root starts run %s", found.run_id, idle, fresh.run_id)
                return fresh.run_id
        elif own.due(now, self._idle):
            await self._rewrite(scope, root, roots.Owner(found.run_id, since=now))
        return None

    async def _rewrite(self, scope: str, root_hash: str | None, owner: Owner) -> bool:
        try:
            await self._state.remember(roots.key(scope, root_hash), roots.dumps(owner), self._owner_ttl)
        except StateUnavailable:
            self._state_error()
            return False
        return True

    # -- after the response ------------------------------------------------------------------------

    def handing_out(self, state_run: str, nests: bool, response: ResponseInfo) -> list[Op]:
        """For a header run's response that delegates (an Agno leader's `delegate_task_to_member`, a call of
        an agent tool), the op keeping the tasks it hands out (`nesting.TASKS`)."""
        if nests or not response.handoffs:
            return []  # a run without the header keeps every text its calls hand out as roots' entries
        delegating = {h.call_id or h.tool for h in response.handoffs if h.kind is HandoffKind.DELEGATE}
        calls = [call for call in response.tool_calls if (call.call_id or call.name) in delegating]
        texts = nesting.delegated(calls)
        if not texts:
            return []
        self._handed.learn(state_run, texts)
        return [nesting.tasks_push(texts)]

    async def remember_response(
        self,
        tenant: str,
        response_id: str,
        run_id: str,
        calls: Sequence[ToolCall],
        pending: continuation.Pending | None,
    ) -> None:
        """Map a Responses API response id to its run, so `previous_response_id` finds it (and, for a
        background response not finished yet, to the request, `pending`, so that its poll is accounted for)."""
        try:
            await self._state.remember(
                continuation.entry(tenant, response_id), continuation.dumps(run_id, calls, pending), self._idle
            )
        except StateUnavailable:
            self._state_error()

    async def remember_tasks(
        self, tenant: str, end_user: str | None, run_id: str, calls: Sequence[ToolCall], session: str | None = None
    ) -> None:
        """Map the texts a response's tool calls may hand to another agent to its run (see `nesting`), in the
        scope of the request that made them (its end user's, its session's)."""
        try:
            await nesting.remember(self._state, roots.scope(tenant, end_user, session), run_id, calls, self._idle)
        except StateUnavailable:
            self._state_error()
