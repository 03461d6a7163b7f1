"""The guard: decides, before and after each model request, whether a run goes on.

`admit()` runs before anything goes upstream: it finds the request's run (`RunIdentity`), runs the guard's
counters and every detector's request plan as ONE state batch, checks the breakers, and either lets the
request through (a `Ticket`) or answers it locally with a provider-native synthetic response. `inspect()`
looks at a non-streamed response before the client sees it. `complete()` runs after the response: usage
and cost, the response plans as one batch, breaker trips and probe outcomes, and the records. Nothing here
touches aiohttp.

Handlers do not call these phases themselves: they drive each request through a `Passage` (`passage()`),
which admits it, reads its response and runs `complete()` exactly once, however the request ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable

from runguard.config import Settings
from runguard.detectors.support import RequestSeen, ResponseKind, ResponseSeen
from runguard.proxy.core.errors import StateFull
from runguard.proxy.core.events import Provider, RequestInfo, ResponseInfo, digest
from runguard.proxy.core.ops import Op, OpResult, Put
from runguard.proxy.core.safe_text import proxy_url
from runguard.proxy.guard import accounting, breaker, nudge, unreadable
from runguard.proxy.guard.batches import Batches
from runguard.proxy.guard.costs.background import BackgroundCosts
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.costs.spending import KeySpending
from runguard.proxy.guard.costs.tokens import TokenEstimator
from runguard.proxy.guard.costs.upstream_prices import UpstreamPrices
from runguard.proxy.guard.decisions import Decisions
from runguard.proxy.guard.ending import WAIT, Ends
from runguard.proxy.guard.judging import Judging
from runguard.proxy.guard.lineup.engine import Batch, Engine, Finding
from runguard.proxy.guard.lineup.policy import Policy, Tightening
from runguard.proxy.guard.observer import Observer
from runguard.proxy.guard.passage import Passage
from runguard.proxy.guard.reader import ResponseReader
from runguard.proxy.guard.records import follow_ups, reporting
from runguard.proxy.guard.stages import Stages
from runguard.proxy.guard.ticket import Ticket, scope_ids
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.base import Adapter
from runguard.proxy.runs import Found, RunIdentity, nesting
from runguard.proxy.state import StateBackend
from runguard.proxy.store.records import RecordedBody, RecordSink, RequestRecord

log = logging.getLogger("runguard.guard")


class Guard:
    """Admits, inspects and completes the requests of every run (see the module docstring).

    Which run a request belongs to is `RunIdentity`'s to say; the state batches
    are `Batches`'; breakers, trips and local answers are `Decisions`'. Handlers
    drive a request through it with a `Passage` (`passage()`).
    """

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
        self._policy = policy
        self._tables = tables
        self._sink = sink
        self._observer = observer
        self._clock = clock
        self._engine = Engine(self._on_fault, shadow=settings.guard.shadow)
        self._reader = ResponseReader(tables, TokenEstimator(), clock, UpstreamPrices(settings.upstreams.compatible))
        self._batches = Batches(
            state, fail_closed=settings.state.fail_closed, clock=clock, on_error=observer.state_error
        )
        self._decisions = Decisions(settings, policy, self._batches, sink, observer, clock, self._reader.priced)
        url = proxy_url(settings.server.host, settings.server.port)
        self.spending = KeySpending(self._batches, policy, settings.guard.breaker, clock, url)  # unread requests
        self.ends = None if self._batches.never_waits else Ends(self._batches, clock, accounting.refresh_ops)
        self.local_ends = Judging() if self._batches.never_waits else None  # streams ending, in memory (`ending`)
        runs = settings.runs
        self.runs = RunIdentity(
            state,
            idle_seconds=runs.idle_seconds,
            inferred_idle_seconds=runs.inferred_idle_seconds,
            groups=runs.tenants,
            on_state_error=observer.state_error,
        )
        self.tenants = self.runs.tenants
        self._proxy_url = url  # named in reset hints when not the default address
        self._finishing: set[asyncio.Task[None]] = set()  # the ends of passages whose clients left
        # With a state that waits, ends run beside the relay (`judging`) unless settings say in the handler;
        # with one that never waits, always in the handler.
        beside = settings.guard.judging == "beside" and not self._batches.never_waits
        self._judging = Judging() if beside else None
        self.stages = Stages()  # seconds spent admitting and judging (runguard_stage_seconds_total)
        # Background responses, accounted for when a poll finds them finished.
        self.background = BackgroundCosts(state, tables, sink, observer, runs.idle_seconds, self.tenants, clock)
        # Told of every finished request with its ticket and response (OpenTelemetry spans, `telemetry`).
        self.on_request: Callable[[Ticket, ResponseSeen | None, RequestRecord], None] | None = None

    @property
    def tokens(self) -> TokenEstimator:
        """The token estimator of responses without usage (`create_app` preloads it off the loop)."""
        return self._reader.tokens

    @property
    def policy(self) -> Policy:
        """Which detectors run with which settings (and what per-run headers may change)."""
        return self._policy

    @property
    def degraded_since(self) -> float | None:
        """When the state backend stopped answering (None while it answers)."""
        return self._batches.degraded_since

    async def settle(self, within: float) -> None:
        """At shutdown: run the ends still queued beside the relay and wait (up to `within` seconds in all)
        for the ends of passages whose clients left (their records), then for the undos of abandoned
        requests, so the in-flight slots they give back are not left taken in a shared state backend."""
        deadline = asyncio.get_running_loop().time() + within
        if self._judging is not None:
            await self._judging.close(within)
        if self._finishing:
            await asyncio.wait(set(self._finishing), timeout=within)
        await self._batches.settle(max(0.0, deadline - asyncio.get_running_loop().time()))

    def passage(
        self,
        adapter: Adapter,
        request: RequestInfo,
        *,
        body: bytes,
        key_hash: str,
        header_run: str | None,
        tight: Tightening = (),
        upstream: Provider | None = None,
    ) -> Passage:
        """A request's way through the guard, from admission to its record (see `passage`); `upstream`: where it
        goes, when not its adapter's provider, from admission on (a stop is priced by where it would have gone)."""
        arrival = functools.partial(self.admit, adapter, request, body=body, key_hash=key_hash, header_run=header_run)
        admit = functools.partial(arrival, tight=tight, upstream=upstream)
        return Passage(
            self, admit, self._finishing, in_place=self._batches.never_waits, judging=self._judging, stages=self.stages
        )

    def _on_fault(self, detector: str, hook: str, exc: BaseException) -> None:
        log.error("detector %s failed in %s: %r", detector, hook, exc, exc_info=exc)
        self._observer.detector_fault(detector, hook)

    # -- before the request goes upstream -----------------------------------------------------

    async def admit(
        self,
        adapter: Adapter,
        request: RequestInfo,
        *,
        body: bytes,
        key_hash: str,
        header_run: str | None,
        tight: Tightening = (),
        upstream: Provider | None = None,
    ) -> Ticket:
        """Decide whether the request may go upstream; `ticket.answer` is set if not (`upstream`: see `passage`)."""
        now = self._clock()
        found = await self.runs.find(header_run, key_hash, request, now)
        if self._judging is not None:
            await self._judging.settled(found.state_run)  # the run's last verdict first, if still pending
        elif self.local_ends is not None:
            await self.local_ends.settled(found.state_run, WAIT)  # a stream of the run whose client has its end
        request = found.request
        seen = RequestSeen(found.run_id, key_hash, now, request, self._tables.window(request.model), digest(body))
        ticket, batch, results = await self._enter(seen, adapter, found, tight, upstream)
        if self.ends is not None and results is not None:  # another process's stream of this run still ending
            results = await self.ends.settled(ticket.ids, results, accounting.ENDING_AT)
        if found.own is not None and results is not None:
            fresh = await self._starts_over(ticket, found, results, batch)
            if fresh is not None:
                found = found.again(fresh)
                seen = dataclasses.replace(seen, run_id=fresh)
                ticket, batch, results = await self._enter(seen, adapter, found, tight, upstream)
        if results is None:
            if self._settings.state.fail_closed or ticket.full is not None:
                name = "state_full" if ticket.full else "state_unavailable"
                notice = StopNotice(name, ticket.run_id, ticket.full or "the shared state backend is unavailable")
                ticket.answer = self._decisions.answer(ticket, notice, ResponseKind.ERROR)
                ticket.blocked_by = name
            return ticket
        renamed = found.recalled(results[-1])
        if renamed is not None:
            seen = dataclasses.replace(seen, request=renamed)
            ticket.seen = seen
        facts, breakers = accounting.facts_from(results)
        ticket.facts = facts
        ticket.carried = accounting.carried_from(results)
        ticket.nudged, ticket.note = accounting.nudged_from(results), accounting.note_from(results)
        findings, ticket.before = self._engine.check_request(ticket.lineup, batch, results, seen, facts)
        findings = nudge.escalated(ticket.nudged, findings)
        if not findings and breakers.run is None and breakers.key is None and breakers.key_model is None:
            return ticket  # nothing to gate, record or answer: the usual request waits on nothing more
        if self._batches.never_waits:
            await self._decide(ticket, findings, breakers)
            return ticket
        # The client may leave while the decision waits on the state (a breaker to open, a probe to claim,
        # the slot of a request answered locally to give back): it is made all the same, and the slot of
        # a request admitted for nobody is given back.
        decision = self._decide(ticket, findings, breakers)
        await self._batches.to_the_end(decision, lambda left: self._batches.later(self._abandoned(ticket, left)))
        return ticket

    async def _starts_over(self, ticket: Ticket, found: Found, results: list[OpResult], batch: Batch) -> str | None:
        """The new run a request found by its root starts (`RunIdentity.starts_over`); its slot in the idle
        run is given back."""
        last_seen = accounting.last_seen_from(results[accounting.REQUEST_OPS + len(batch.ops)])

        def in_flight() -> int:  # read last: admit reads the facts anyway
            return accounting.facts_from(results)[0].in_flight

        fresh = await self.runs.starts_over(found, ticket.seen.now, last_seen, in_flight)
        if fresh is not None:
            await self._batches.execute(ticket.ids, accounting.release_ops())
        return fresh

    async def _enter(
        self, seen: RequestSeen, adapter: Adapter, found: Found, tight: Tightening, upstream: Provider | None = None
    ) -> tuple[Ticket, Batch, list[OpResult] | None]:
        """The request's ticket in its run, and its first batch run (None: the state failed): the guard's
        counters, every detector's request plan, for a run found by its root the run's last time seen
        (`seen_op`), if `found.asks_tasks` the tasks its run's delegations handed out (`nesting.TASKS`,
        read here: see `RunIdentity.thread_found`), and the agent's `naming` op (last)."""
        key_hash, request = seen.key_hash, seen.request
        ids = scope_ids(found.state_run, key_hash, request.model, seen.now, found.thread)
        ticket = Ticket(
            seen.run_id,
            key_hash,
            ids,
            seen,
            adapter,
            nests=not found.header_run,
            tenant=found.tenant,
            proxy_url=self._proxy_url,
            upstream=upstream,
        )
        ticket.lineup = self._policy.lineup(key_hash, request.model, tight)
        if request.parse_error:
            ticket.lineup = unreadable.counting(ticket.lineup)  # only what needs no content can judge it
        batch = self._engine.plan_request(ticket.lineup, seen, accounting.REQUEST_OPS, found.nested)
        ops = [*accounting.request_ops(seen.now, seen.body_hash), *batch.ops]
        if found.own is not None:
            ops.append(accounting.seen_op(seen.now))
        tasks = len(ops) if found.asks_tasks else None
        if tasks is not None:
            ops.append(nesting.TASKS_GET)
        if found.naming is not None:
            ops.append(found.naming)
        try:
            results = await self._batches.execute(ids, ops, undo=accounting.release_ops(), refusable=True)
        except StateFull as exc:
            ticket.full, results = str(exc), None
        if tasks is not None and results is not None:
            # Judged in its thread from its response on, and every request after it from the start.
            thread = self.runs.thread_found(found, results[tasks])
            if thread is not None:
                ticket.ids = dataclasses.replace(ticket.ids, thread=thread)
        return ticket, batch, results

    async def _abandoned(self, ticket: Ticket, deciding: asyncio.Future[None]) -> None:
        try:
            await deciding
        except Exception:
            log.exception("admission failed after its client left")
            return
        if ticket.answer is None:
            await self._batches.execute(ticket.ids, [*accounting.release_ops(), *ticket.probe_undo])

    async def _decide(self, ticket: Ticket, findings: list[Finding], breakers: accounting.Breakers) -> None:
        """Gate on the breakers, act on the request's findings, and answer locally if either says so."""
        await self._decisions.gate(ticket, breakers)
        if ticket.answer is None:
            await self._decisions.act(ticket, findings, breakers, seen=None)
        if ticket.answer is not None:
            # Answered locally: free the in-flight slot, and give back a probe this request had claimed.
            await self._batches.execute(ticket.ids, [*accounting.release_ops(), *ticket.probe_undo])

    # -- after the response -----------------------------------------------------------------------

    def response_seen(self, ticket: Ticket, info: ResponseInfo, status: int | None, latency: float) -> ResponseSeen:
        """The response as the detectors and the records see it (`ResponseReader.seen`)."""
        return self._reader.seen(ticket, info, status, latency)

    def inspect(self, ticket: Ticket, seen: ResponseSeen) -> Synthetic | None:
        """Before a non-streamed response reaches the client: a replacement, or None."""
        if ticket.facts is None:
            return None
        findings = nudge.escalated(ticket.nudged, self._engine.inspect_response(ticket.lineup, ticket.views_of(seen)))
        blocking = next((f for f in findings if f.blocking), None)
        ticket.inspected = findings
        if blocking is None:
            return None
        return self._decisions.stop(ticket, blocking)

    async def complete(
        self,
        ticket: Ticket,
        seen: ResponseSeen | None,
        *,
        client_status: int | None,
        error: str | None = None,
        body: RecordedBody | None = None,
        remembered: bool = False,
    ) -> None:
        """Account for the response, run the response plans, trip or close breakers, record.

        `seen` is None when nothing came back from upstream to parse (the
        request was answered locally, or the client left before headers).
        `remembered`: `remember` ran already (the end is judged beside the relay).
        """
        if seen is None:
            if ticket.answer is None and ticket.facts is not None:
                await self._batches.execute(ticket.ids, accounting.release_ops())
            self._emit(ticket, None, client_status, error, body)
            return
        if not remembered:
            # First, so that a follow-up naming this response, or a thread its tool calls start, finds its
            # run however long the rest takes.
            await self.remember(ticket, seen)
        if ticket.facts is None:
            await self._count_unguarded(ticket, seen)
            self._emit(ticket, seen, client_status, error, body)
            return
        if seen.response.parse_error and seen.status is not None and seen.status < 300:
            self._observer.parse_error(str(ticket.request.api), "response")  # an answer in a shape not known
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
        handing_out = self.runs.handing_out(ticket.ids.run, ticket.nests, seen.response)
        results = await self._batches.execute(ticket.ids, [*base, *batch.ops, *handing_out])
        if results is not None:
            checked = nudge.escalated(ticket.nudged, self._engine.check_response(lineup, batch, results, views))
            findings += checked
            late += checked
            breakers = accounting.Breakers(None, None, None)
            if any(f.blocking for f in findings):
                breakers = await self._decisions.breakers(ticket)
            blocking = await self._decisions.act(ticket, findings, breakers, seen=seen, answers=False)
            tripped = {blocking.verdict.scope} if blocking is not None else set()
            after: list[Op] = [Put(scope, breaker.FIELD, None) for scope in ticket.probes if scope not in tripped]
            warnings = [f for f in late if not f.blocking]
            if warnings:
                after += accounting.carry_ops(ticket.carried_text(warnings))
            if after:
                await self._batches.execute(ticket.ids, after)
        self._emit(ticket, seen, client_status, error, body)

    async def _count_unguarded(self, ticket: Ticket, seen: ResponseSeen) -> None:
        """A request let through while the state was unavailable (fail open): its usage and cost still go to the run
        and the key's day, if the state answers by now. No detector runs (none has request-phase results), and no
        in-flight slot is given back: the step that takes it failed (if it ran all the same, `admit` gives it back)."""
        ops = accounting.usage_ops(seen.response.usage, seen.usd)
        if ops:
            await self._batches.execute(ticket.ids, ops)

    async def remember(self, ticket: Ticket, seen: ResponseSeen) -> None:
        """What lets a follow-up find the response's run (`follow_ups`); before the rest of the end."""
        await follow_ups.remember(self.runs, ticket, seen)

    def _emit(
        self,
        ticket: Ticket,
        seen: ResponseSeen | None,
        status: int | None,
        error: str | None,
        body: RecordedBody | None,
    ) -> None:
        unpriced = seen is not None and self._reader.unpriced(ticket, seen)
        record = reporting.request_record(ticket, seen, status, error, body, unpriced=unpriced)
        self._sink.submit(record)
        try:
            self._observer.request_done(record)
            if self.on_request is not None:
                self.on_request(ticket, seen, record)
        except Exception:  # an observer must never break a request
            log.exception("observer failed")
