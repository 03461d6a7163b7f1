"""The guard: decides, before and after each model request, whether a run goes on.

`admit()` runs before anything goes upstream: it resolves the run, runs the
guard's counters and every detector's request plan as ONE state batch, checks
the breakers, and either lets the request through (a `Ticket`) or answers it
locally with a provider-native synthetic response. `inspect()` looks at a
non-streamed response before the client sees it. `complete()` runs after the
response: usage and cost, the response plans as one batch, breaker trips and
probe outcomes, and the records. Nothing here touches aiohttp.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from runguard.config.settings import Settings
from runguard.detectors.base import RequestSeen, ResponseKind, ResponseSeen
from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.events import HandoffKind, RequestInfo, ResponseInfo, Usage, digest
from runguard.proxy.core.ops import CompareAndSet, Get, Op, OpResult, Put, Scope
from runguard.proxy.core.safe_text import proxy_url
from runguard.proxy.core.tasks import hold
from runguard.proxy.guard import accounting, breaker, nudge, reporting, unreadable
from runguard.proxy.guard.background import BackgroundCosts
from runguard.proxy.guard.breaker import BreakerRecord, GateKind
from runguard.proxy.guard.engine import Batch, Engine, Finding
from runguard.proxy.guard.observer import Observer
from runguard.proxy.guard.policy import Policy, Tightening
from runguard.proxy.guard.pricing import ModelTables
from runguard.proxy.guard.ticket import Ticket, scope_ids
from runguard.proxy.guard.tokens import TokenEstimator
from runguard.proxy.providers import registry
from runguard.proxy.providers.base import Adapter, StopNotice, Synthetic
from runguard.proxy.providers.common import handoffs
from runguard.proxy.runs import agent_names, continuation, nesting, roots, tenants
from runguard.proxy.runs.keys import redact
from runguard.proxy.runs.roots import Owner
from runguard.proxy.state.base import ScopeIds, StateBackend
from runguard.proxy.store.records import RecordedBody, RecordSink, RequestRecord, TripRecord

log = logging.getLogger("runguard.guard")
T = TypeVar("T")

BREAKER_SCOPES = (Scope.KEY_MODEL, Scope.KEY, Scope.RUN)


async def _ran(batch: Awaitable[list[OpResult]]) -> Sequence[OpResult] | None:
    """The results of a batch that may fail or lose its reply: None if it did not run (or cannot tell)."""
    try:
        return await batch
    except StateUnavailable as exc:
        return await exc.pending if exc.pending is not None else None


def _asks_tasks(header_run: str | None, nested: bool, request: RequestInfo) -> bool:
    """Whether a request reads its run's delegated tasks (`nesting.TASKS`) with its batch: the first request
    of a conversation in a header run, when this process does not know it for a thread already. Its
    conversation's next requests are then known here; a replica that serves none of its first requests
    judges the thread's requests in the run's scope."""
    return header_run is not None and not nested and request.assistant_turns == 0


class Guard:
    def __init__(
        self,
        settings: Settings,
        state: StateBackend,
        policy: Policy,
        tables: ModelTables,
        sink: RecordSink,
        observer: Observer,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._state = state
        self._policy = policy
        self._tables = tables
        self._sink = sink
        self._observer = observer
        self._clock = clock
        self._engine = Engine(self._on_fault, shadow=settings.guard.shadow)
        self._tokens = TokenEstimator()
        self.degraded_since: float | None = None
        self._owner_ttl = settings.runs.idle_seconds * roots.OWNER_TTL_RUNS
        self._handed = nesting.HandedOut()  # the conversations header runs' delegations started
        # named in reset hints when not the default address
        self._proxy_url = proxy_url(settings.server.host, settings.server.port)
        self.tenants = tenants.Tenants(settings.runs.tenants)
        self._undoing: set[asyncio.Task[None]] = set()  # undos waiting for a lost batch to settle
        # Background responses, accounted for when a poll finds them finished.
        self.background = BackgroundCosts(
            state, tables, sink, observer, settings.runs.idle_seconds, self.tenants, clock
        )
        # Told of every finished request with its ticket and response (OpenTelemetry spans, `telemetry`).
        self.on_request: Callable[[Ticket, ResponseSeen | None, RequestRecord], None] | None = None

    @property
    def tokens(self) -> TokenEstimator:
        """The token estimator of responses without usage (`create_app` preloads it off the loop)."""
        return self._tokens

    @property
    def policy(self) -> Policy:
        """Which detectors run with which settings (and what per-run headers may change)."""
        return self._policy

    async def settle(self, within: float) -> None:
        """At shutdown: wait (up to `within` seconds) for the undos of abandoned requests, so the
        in-flight slots they give back are not left taken in a shared state backend."""
        if self._undoing:
            await asyncio.wait(set(self._undoing), timeout=within)

    # -- helpers ---------------------------------------------------------------------------

    def _on_fault(self, detector: str, hook: str, exc: BaseException) -> None:
        log.error("detector %s failed in %s: %r", detector, hook, exc, exc_info=exc)
        self._observer.detector_fault(detector, hook)

    async def _execute(self, ids: ScopeIds, ops: Sequence[Op], undo: Sequence[Op] = ()) -> list[OpResult] | None:
        """The batch's results, or None when the backend failed.

        `undo`: ops that take back what the batch did, run if it failed here but
        turns out to have run all the same (its reply was lost), or if the caller
        is cancelled (its client left) while the batch runs: the caller goes on
        without its results, so what it holds (an in-flight slot) would otherwise
        be held until the run expires.
        """
        try:
            if undo and not self._state.never_waits:
                batch = self._state.execute(ids, ops)
                results = await self._to_the_end(batch, lambda ran: self._undo_when_run(ids, _ran(ran), undo))
            else:
                results = await self._state.execute(ids, ops)
        except StateUnavailable as exc:
            if self.degraded_since is None:
                log.warning(
                    "state backend unavailable, failing %s: %s",
                    "closed" if self._settings.state.fail_closed else "open",
                    exc,
                )
                self.degraded_since = self._clock()
            self._observer.state_error()
            if undo and exc.pending is not None:
                self._undo_when_run(ids, exc.pending, undo)
            return None
        if self.degraded_since is not None:
            log.warning("state backend answers again")
            self.degraded_since = None
        return results

    async def _to_the_end(self, work: Awaitable[T], if_left: Callable[[asyncio.Future[T]], object]) -> T:
        """`work`'s result. If the caller is cancelled meanwhile (its client left), `work` still runs to
        its end, and `if_left` is handed it to give back what it took for nobody."""
        running = asyncio.ensure_future(work)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            if_left(running)
            raise

    def _undo_when_run(self, ids: ScopeIds, pending: Awaitable[Sequence[OpResult] | None], undo: Sequence[Op]) -> None:
        async def undo_when_run() -> None:
            if await pending is not None:
                await self._execute(ids, undo)

        hold(self._undoing, undo_when_run())

    def _answer(self, ticket: Ticket, notice: StopNotice, kind: ResponseKind) -> Synthetic:
        adapter = ticket.adapter
        if kind is ResponseKind.STOP:
            stop = adapter.stop_response(notice, ticket.request)
            if stop is not None:
                return stop
        status = registry.block_status(adapter.provider, self._settings.guard)
        return adapter.error_response(notice, stream=ticket.request.stream, status=status)

    def _trip_record(self, ticket: Ticket, finding: Finding, seen: ResponseSeen | None) -> TripRecord:
        cap = self._policy.config_of("max_requests", ticket.key_hash, ticket.request.model)
        step_cap, texts = int(getattr(cap, "limit", 100)), self._settings.store.record_bodies
        return reporting.trip_record(ticket, finding, seen, self._clock(), step_cap, with_texts=texts)

    def _record_trip(self, trip: TripRecord) -> None:
        self._sink.submit(trip)
        try:
            self._observer.tripped(trip)
        except Exception:  # an observer must never break a request
            log.exception("observer failed")

    def _open_ops(self, ticket: Ticket, finding: Finding, existing: BreakerRecord | None) -> Put:
        scope = Scope.KEY if finding.verdict.scope is Scope.KEY_DAY else finding.verdict.scope
        cfg = self._settings.guard.breaker
        record = breaker.trip(
            existing,
            detector=finding.detector,
            reason=finding.verdict.reason,
            now=self._clock(),
            request_index=ticket.facts.request_index if ticket.facts else 0,
            base_cooldown=cfg.cooldown_seconds,
            max_cooldown=cfg.max_cooldown_seconds,
            latched=finding.latches and scope is Scope.RUN,
        )
        return Put(scope, breaker.FIELD, record.dumps())

    # -- before the request goes upstream -----------------------------------------------------

    async def _resolve_run(
        self, header_run: str | None, tenant: str, request: RequestInfo, now: float
    ) -> tuple[str, RequestInfo, Owner | None]:
        """The run id, the request with tool-result names filled from a previous response, and the
        root's owner when the run was found by the conversation's root (see `roots`); all in the request's
        `tenant` (see `tenants`)."""
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
        scope = roots.scope(tenant, request.end_user)
        owner = await self._owner(scope, request, now)
        if owner is None:  # the state does not answer
            return roots.fallback_run(scope, request.root_hash), request, None
        return owner.run_id, request, owner

    async def _owner(self, scope: str, request: RequestInfo, now: float) -> Owner | None:
        """The run the request's root belongs to in its `roots.scope`; a new one if it belongs to none
        (None: the state failed)."""
        root_hash = request.root_hash
        name = roots.key(scope, root_hash)
        try:
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
            self._observer.state_error()
            return None
        return roots.loads(found) if found is not None else None

    async def _rewrite_owner(self, ticket: Ticket, owner: Owner) -> bool:
        name = roots.key(roots.scope(ticket.tenant, ticket.request.end_user), ticket.request.root_hash)
        try:
            await self._state.remember(name, roots.dumps(owner), self._owner_ttl)
        except StateUnavailable:
            self._observer.state_error()
            return False
        return True

    async def _over_or_kept(
        self, ticket: Ticket, results: Sequence[OpResult], seen_result: OpResult, owner: Owner
    ) -> str | None:
        """For a run found by its root: the id of the new run the request starts, if its conversation starts
        again (no assistant turn yet) after the run has been idle for `runs.inferred_idle_seconds` with
        nothing in flight (a new invocation, not the same run's retry or its user back from a pause); else
        None, the root's entry written again if it is due (`roots`)."""
        now = ticket.seen.now
        last_seen = accounting.last_seen_from(seen_result)
        idle = now - last_seen
        if (
            ticket.request.assistant_turns == 0
            and last_seen > 0
            and idle > self._settings.runs.inferred_idle_seconds
            and accounting.facts_from(results)[0].in_flight == 1  # read last: admit reads the facts anyway
        ):
            fresh = roots.new_run(roots.scope(ticket.tenant, ticket.request.end_user), ticket.request.root_hash, now)
            if await self._rewrite_owner(ticket, fresh):
                log.info("run %s was idle %.0f s: its root starts run %s", ticket.run_id, idle, fresh.run_id)
                await self._execute(ticket.ids, accounting.release_ops())
                return fresh.run_id
        elif owner.due(now, self._settings.runs.idle_seconds):
            await self._rewrite_owner(ticket, roots.Owner(ticket.run_id, since=now))
        return None

    async def admit(
        self,
        adapter: Adapter,
        request: RequestInfo,
        *,
        body: bytes,
        key_hash: str,
        header_run: str | None,
        tight: Tightening = (),
    ) -> Ticket:
        """Decide whether the request may go upstream; `ticket.answer` is set if not."""
        now = self._clock()
        tenant = self.tenants.of(key_hash)
        run_id, request, owner = await self._resolve_run(header_run, tenant, request, now)
        # A handoff's acknowledgement names its target now; a name learned before is read back with
        # the run's state (the last op of the batch), whichever replica learned it.
        acked, naming = agent_names.naming(request)
        request = agent_names.named(request, acked)
        threaded = header_run is not None and self._handed.started(tenants.state_id(tenant, run_id), request)
        nested = threaded or (owner is not None and owner.nested)
        own = None if nested else owner  # a run found by its root, which may start over (`roots`)
        seen = RequestSeen(run_id, key_hash, now, request, self._tables.window(request.model), digest(body))
        timed = own is not None
        ticket, batch, results = await self._enter(seen, adapter, header_run, nested, naming, tight, timed)
        if own is not None and results is not None:
            fresh = await self._over_or_kept(ticket, results, results[accounting.REQUEST_OPS + len(batch.ops)], own)
            if fresh is not None:
                seen = dataclasses.replace(seen, run_id=fresh)
                ticket, batch, results = await self._enter(seen, adapter, header_run, nested, naming, tight, timed)
        if results is None:
            if self._settings.state.fail_closed:
                notice = StopNotice("state_unavailable", ticket.run_id, "the shared state backend is unavailable")
                ticket.answer = self._answer(ticket, notice, ResponseKind.ERROR)
                ticket.blocked_by = "state_unavailable"
            return ticket
        if acked is None and naming is not None:
            name = agent_names.recalled(results[-1])
            if name is not None:
                seen = dataclasses.replace(seen, request=agent_names.named(request, name))
                ticket.seen = seen
        facts, breakers = accounting.facts_from(results)
        ticket.facts = facts
        ticket.carried = accounting.carried_from(results)
        ticket.nudged, ticket.note = accounting.nudged_from(results), accounting.note_from(results)
        findings, ticket.before = self._engine.check_request(ticket.lineup, batch, results, seen, facts)
        findings = nudge.escalated(ticket.nudged, findings)
        if not findings and breakers.run is None and breakers.key is None and breakers.key_model is None:
            return ticket  # nothing to gate, record or answer: the usual request waits on nothing more
        if self._state.never_waits:
            await self._decide(ticket, findings, breakers)
            return ticket
        # The client may leave while the decision waits on the state (a breaker to open, a probe to claim,
        # the slot of a request answered locally to give back): it is made all the same, and the slot of
        # a request admitted for nobody is given back.
        decision = self._decide(ticket, findings, breakers)
        await self._to_the_end(decision, lambda deciding: hold(self._undoing, self._abandoned(ticket, deciding)))
        return ticket

    async def _enter(
        self,
        seen: RequestSeen,
        adapter: Adapter,
        header_run: str | None,
        nested: bool,
        naming: Op | None,
        tight: Tightening,
        timed: bool,
    ) -> tuple[Ticket, Batch, list[OpResult] | None]:
        """The request's ticket in its run, and its first batch run (None: the state failed): the guard's
        counters, every detector's request plan, if `timed` the run's last time seen (`seen_op`), if
        `_asks_tasks` the tasks its run's delegations handed out (`nesting.TASKS`, read here: see
        `_thread_found`), and the agent's `naming` op (last)."""
        run_id, key_hash, request = seen.run_id, seen.key_hash, seen.request
        tenant = self.tenants.of(key_hash)
        state_run = tenants.state_id(tenant, run_id)  # the run's state is its tenant's (`tenants`)
        thread = nesting.thread_id(state_run, request.root_hash, request.agent.fingerprint) if nested else ""
        ids = scope_ids(state_run, key_hash, request.model, seen.now, thread)
        ticket = Ticket(
            run_id, key_hash, ids, seen, adapter, nests=not header_run, tenant=tenant, proxy_url=self._proxy_url
        )
        ticket.lineup = self._policy.lineup(key_hash, request.model, tight)
        if request.parse_error:
            ticket.lineup = unreadable.counting(ticket.lineup)  # only what needs no content can judge it
        batch = self._engine.plan_request(ticket.lineup, seen, accounting.REQUEST_OPS, nested)
        ops = [*accounting.request_ops(seen.now, seen.body_hash), *batch.ops]
        if timed:
            ops.append(accounting.seen_op(seen.now))
        tasks = len(ops) if _asks_tasks(header_run, nested, request) else None
        if tasks is not None:
            ops.append(nesting.TASKS_GET)
        if naming is not None:
            ops.append(naming)
        results = await self._execute(ids, ops, undo=accounting.release_ops())
        if tasks is not None and results is not None:
            self._thread_found(ticket, results[tasks])
        return ticket, batch, results

    async def _abandoned(self, ticket: Ticket, deciding: asyncio.Future[None]) -> None:
        try:
            await deciding
        except Exception:
            log.exception("admission failed after its client left")
            return
        if ticket.answer is None:
            await self._execute(ticket.ids, [*accounting.release_ops(), *ticket.probe_undo])

    async def _decide(self, ticket: Ticket, findings: list[Finding], breakers: accounting.Breakers) -> None:
        """Gate on the breakers, act on the request's findings, and answer locally if either says so."""
        await self._gate(ticket, breakers)
        if ticket.answer is None:
            await self._act(ticket, findings, breakers, seen=None)
        if ticket.answer is not None:
            # Answered locally: free the in-flight slot, and give back a probe this request had claimed.
            await self._execute(ticket.ids, [*accounting.release_ops(), *ticket.probe_undo])

    async def _gate(self, ticket: Ticket, breakers: accounting.Breakers) -> None:
        """Answer locally while a breaker is open; admit one probe when its cooldown is over."""
        probes: list[Scope] = []
        cfg = self._settings.guard.breaker
        for scope in BREAKER_SCOPES:
            record = breakers.of(scope)
            gate = breaker.gate(record, self._clock(), cfg.probe_timeout_seconds)
            if gate.kind is GateKind.PROBE and gate.record is not None and gate.candidate is not None:
                won = await self._execute(
                    ticket.ids, [CompareAndSet(scope, breaker.FIELD, gate.record.dumps(), gate.candidate.dumps())]
                )
                if won is not None and won[0] == gate.candidate.dumps():
                    probes.append(scope)
                    # Undoing the claim lets a later request probe if this one never goes upstream.
                    ticket.probe_undo.append(
                        CompareAndSet(scope, breaker.FIELD, gate.candidate.dumps(), gate.record.dumps())
                    )
                    continue
            if gate.kind is GateKind.ALLOW:
                continue
            held = gate.record or record
            assert held is not None
            self._deny(ticket, scope, held)
            return
        ticket.probes = tuple(probes)

    def _deny(self, ticket: Ticket, scope: Scope, record: BreakerRecord) -> None:
        """Answer a request locally while a breaker is open, as the detector that opened it is set to answer
        (`response`). A run stopped for good (`latched`) gets that answer to every request until it is reset."""
        retry: int | None = None  # a latched run has no time to come back at: no Retry-After
        if record.latched:
            reason = f"run stopped at request {record.request_index}: {record.reason} (it stays stopped until reset)"
        else:
            remaining = max(0.0, record.reopens_at() - self._clock())
            retry = math.ceil(remaining) if math.isfinite(remaining) else None  # whole seconds, never early
            reason = f"breaker open since request {record.request_index}: {record.reason} (retry in {retry} s)"
        notice = StopNotice(record.detector, ticket.run_id, reason, ticket.reset_hint(scope))
        config = self._policy.config_of(record.detector, ticket.key_hash, ticket.request.model)
        kind = config.response if config is not None else ResponseKind.ERROR
        answer = self._answer(ticket, notice, kind)
        if retry and answer.status >= 400:  # an error says when to come back; a stop completion cannot
            answer = dataclasses.replace(answer, headers={**answer.headers, "Retry-After": str(retry)})
        ticket.answer = answer
        ticket.blocked_by = record.detector

    async def _act(
        self,
        ticket: Ticket,
        findings: list[Finding],
        breakers: accounting.Breakers,
        seen: ResponseSeen | None,
        *,
        answers: bool = True,
    ) -> Finding | None:
        """Record every finding; open the breaker for the first blocking one. Returns it.

        `answers`: the request has not gone upstream yet, so a blocking finding
        also answers it locally (and the request is recorded as blocked). After
        the response, a blocking finding only opens the breaker for what follows.
        `seen`: the response the findings came after (None before one): its cost and
        tokens count in each trip's spend so far.
        """
        blocking = next((f for f in findings if f.blocking), None)
        if blocking is not None:  # a stop now needs no note first
            findings = [dataclasses.replace(f, nudge=False) if f.nudge else f for f in findings]
        for finding in findings:
            trip = self._trip_record(ticket, finding, seen)
            ticket.trips.append(trip)
            self._record_trip(trip)
            if not finding.blocking:
                ticket.warnings.append(finding)
        if blocking is None:
            ops = nudge.nudging(ticket, [f for f in findings if f.nudge], now=answers)
            if ops:
                await self._execute(ticket.ids, ops)
            return None
        scope = blocking.verdict.scope
        existing = breakers.of(scope)
        await self._execute(ticket.ids, [self._open_ops(ticket, blocking, existing)])
        if answers and ticket.answer is None and not ticket.blocked_by:
            notice = StopNotice(
                blocking.detector,
                ticket.run_id,
                blocking.verdict.reason,
                ticket.reset_hint(scope),
            )
            ticket.answer = self._answer(ticket, notice, blocking.response)
            ticket.blocked_by = blocking.detector
        return blocking

    # -- after the response -----------------------------------------------------------------------

    def _usage(self, ticket: Ticket, info: ResponseInfo, status: int | None) -> Usage | None:
        if info.usage is not None:
            return info.usage
        if status is None or status >= 300 or ticket.request.background:
            return None  # a background response's usage is counted when it is polled (`background`)
        # Streamed Chat without include_usage carries no usage: estimate, never count zero.
        said = info.text + "".join(call.name + call.arguments for call in info.tool_calls)
        output = self._tokens.count(said, ticket.request.model, ticket.request.api)
        return Usage(ticket.request.estimated_input_tokens, output, estimated=True)

    def response_seen(self, ticket: Ticket, info: ResponseInfo, status: int | None, latency: float) -> ResponseSeen:
        info = handoffs.with_agent_tools(info, ticket.request.agent_tools)
        if info.error:  # upstream text, kept in records, logs and trips: it may echo the request's key
            info = dataclasses.replace(info, error=redact(info.error, ticket.credentials()))
        usage = self._usage(ticket, info, status)
        if usage is not info.usage:
            info = dataclasses.replace(info, usage=usage)
        if info.model is not None:
            self._tables.served(ticket.request.model, info.model)
        return ResponseSeen(
            ticket.run_id,
            ticket.key_hash,
            self._clock(),
            ticket.request,
            info,
            ticket.facts or accounting.UNKNOWN_FACTS,
            status,
            self._tables.cost(ticket.request.model, usage),
            latency,
        )

    def inspect(self, ticket: Ticket, seen: ResponseSeen) -> Synthetic | None:
        """Before a non-streamed response reaches the client: a replacement, or None."""
        if ticket.facts is None:
            return None
        findings = nudge.escalated(ticket.nudged, self._engine.inspect_response(ticket.lineup, ticket.views_of(seen)))
        blocking = next((f for f in findings if f.blocking), None)
        ticket.inspected = findings
        if blocking is None:
            return None
        notice = StopNotice(
            blocking.detector,
            ticket.run_id,
            blocking.verdict.reason,
            ticket.reset_hint(blocking.verdict.scope),
        )
        ticket.blocked_by = blocking.detector
        return self._answer(ticket, notice, blocking.response)

    async def complete(
        self,
        ticket: Ticket,
        seen: ResponseSeen | None,
        *,
        client_status: int | None,
        error: str | None = None,
        body: RecordedBody | None = None,
    ) -> None:
        """Account for the response, run the response plans, trip or close breakers, record.

        `seen` is None when nothing came back from upstream to parse (the
        request was answered locally, or the client left before headers).
        """
        if seen is None:
            if ticket.answer is None and ticket.facts is not None:
                await self._execute(ticket.ids, accounting.release_ops())
            self._emit(ticket, None, client_status, error, body)
            return
        if ticket.facts is None:
            await self._count_unguarded(ticket, seen)
            self._emit(ticket, seen, client_status, error, body)
            return
        if seen.response.parse_error and seen.status is not None and seen.status < 300:
            self._observer.parse_error(str(ticket.request.api), "response")  # an answer in a shape not known
        # First, so that a follow-up naming this response, or a thread its tool calls start, finds its
        # run however long the rest takes.
        await self._remember(ticket, seen)
        if ticket.nests and seen.response.tool_calls:
            await self._remember_tasks(ticket, seen)
        views = ticket.views_of(seen)
        lineup = ticket.lineup
        # Findings made once the client has its answer's headers (a stream's inspection, and every
        # check after the response) are `late`: their warnings wait for the run's next answer.
        if ticket.inspected is not None:
            findings, late = list(ticket.inspected), []
        else:
            findings = nudge.escalated(ticket.nudged, self._engine.inspect_response(lineup, views))
            late = list(findings)
        base = accounting.response_ops(seen.response.usage, seen.usd)
        batch = self._engine.plan_response(lineup, views, len(base), ticket.nested)
        results = await self._execute(ticket.ids, [*base, *batch.ops, *self._handing_out(ticket, seen)])
        if results is not None:
            checked = nudge.escalated(ticket.nudged, self._engine.check_response(lineup, batch, results, views))
            findings += checked
            late += checked
            breakers = accounting.Breakers(None, None, None)
            if any(f.blocking for f in findings):
                breakers = await self._breakers(ticket)
            blocking = await self._act(ticket, findings, breakers, seen=seen, answers=False)
            tripped = {blocking.verdict.scope} if blocking is not None else set()
            after: list[Op] = [Put(scope, breaker.FIELD, None) for scope in ticket.probes if scope not in tripped]
            warnings = [f for f in late if not f.blocking]
            if warnings:
                after += accounting.carry_ops(ticket.carried_text(warnings))
            if after:
                await self._execute(ticket.ids, after)
        self._emit(ticket, seen, client_status, error, body)

    def _thread_found(self, ticket: Ticket, tasks: OpResult) -> None:
        """A header run's request whose conversation its run's delegations started (`tasks`, read with its
        batch) is judged in its thread from its response on, and every request after it from the start."""
        request = ticket.request
        if self._handed.found(ticket.ids.run, request, tasks):
            thread = nesting.thread_id(ticket.ids.run, request.root_hash, request.agent.fingerprint)
            ticket.ids = dataclasses.replace(ticket.ids, thread=thread)

    def _handing_out(self, ticket: Ticket, seen: ResponseSeen) -> list[Op]:
        """For a header run's response that delegates (an Agno leader's `delegate_task_to_member`, a call of an
        agent tool), the op
        keeping the tasks it hands out (`nesting.TASKS`)."""
        if ticket.nests or not seen.response.handoffs:
            return []  # a run without the header keeps every text its calls hand out as roots' entries
        delegating = {h.call_id or h.tool for h in seen.response.handoffs if h.kind is HandoffKind.DELEGATE}
        calls = [call for call in seen.response.tool_calls if (call.call_id or call.name) in delegating]
        texts = nesting.delegated(calls)
        if not texts:
            return []
        self._handed.learn(ticket.ids.run, texts)
        return [nesting.tasks_push(texts)]

    async def _count_unguarded(self, ticket: Ticket, seen: ResponseSeen) -> None:
        """A request let through while the state was unavailable (fail open): its response's usage
        and cost are still added to the run and the key's day, if the state answers by now.

        No detector runs (none has its request-phase results), and there is no
        in-flight slot to give back: the request step that takes it failed (if
        it ran all the same, `admit` gives the slot back when that is known).
        """
        ops = accounting.usage_ops(seen.response.usage, seen.usd)
        if ops:
            await self._execute(ticket.ids, ops)
        await self._remember(ticket, seen)

    async def _breakers(self, ticket: Ticket) -> accounting.Breakers:
        got = await self._execute(ticket.ids, [Get(scope, breaker.FIELD) for scope in BREAKER_SCOPES])
        if got is None:
            return accounting.Breakers(None, None, None)
        records = {scope: BreakerRecord.loads(value) for scope, value in zip(BREAKER_SCOPES, got, strict=True)}
        return accounting.Breakers(records[Scope.RUN], records[Scope.KEY], records[Scope.KEY_MODEL])

    async def _remember(self, ticket: Ticket, seen: ResponseSeen) -> None:
        """Responses API: map the response id to its run, so `previous_response_id` finds it (and, for a
        background response not finished yet, to the request, so that its poll is accounted for)."""
        response_id = seen.response.response_id
        if response_id is None or not registry.chains_responses(ticket.request.api):
            return
        pending = None
        if ticket.request.background and seen.response.usage is None:
            index = ticket.facts.request_index if ticket.facts else 0
            request = ticket.request
            pending = continuation.Pending(
                ticket.key_hash, request.model, request.agent.label, index, ticket.nests, request.end_user
            )
        try:
            await self._state.remember(
                continuation.entry(ticket.tenant, response_id),
                continuation.dumps(ticket.run_id, seen.response.tool_calls, pending),
                self._settings.runs.idle_seconds,
            )
        except StateUnavailable:
            self._observer.state_error()

    async def _remember_tasks(self, ticket: Ticket, seen: ResponseSeen) -> None:
        """Map the texts this response's tool calls may hand to another agent to the run (see `nesting`)."""
        try:
            calls, ttl = seen.response.tool_calls, self._settings.runs.idle_seconds
            scope = roots.scope(ticket.tenant, ticket.request.end_user)
            await nesting.remember(self._state, scope, ticket.run_id, calls, ttl)
        except StateUnavailable:
            self._observer.state_error()

    def _emit(
        self,
        ticket: Ticket,
        seen: ResponseSeen | None,
        status: int | None,
        error: str | None,
        body: RecordedBody | None,
    ) -> None:
        record = reporting.request_record(ticket, seen, status, error, body)
        self._sink.submit(record)
        try:
            self._observer.request_done(record)
            if self.on_request is not None:
                self.on_request(ticket, seen, record)
        except Exception:  # an observer must never break a request
            log.exception("observer failed")
