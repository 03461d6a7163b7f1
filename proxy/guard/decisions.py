"""What the guard does with what it found: gate on the breakers, open them, record trips, answer locally.

Before a request goes upstream, an open breaker answers it locally (`gate`),
once its cooldown is over one request probes whether the run is well again,
and a blocking finding opens its breaker and answers the request as its
detector is set to answer (`act`). After a response, a blocking finding only
opens the breaker for the requests that follow. Every finding is a trip
record; a non-blocking one is a warning the client sees.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable

from runguard.config import Settings
from runguard.detectors.max_requests import MaxRequestsConfig
from runguard.detectors.support import ResponseKind, ResponseSeen
from runguard.proxy.core.ops import CompareAndSet, Get, Put, Scope
from runguard.proxy.guard import accounting, breaker, client_answers, nudge
from runguard.proxy.guard.batches import Batches
from runguard.proxy.guard.breaker import BreakerRecord, GateKind
from runguard.proxy.guard.lineup.engine import Finding
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.observer import Observer
from runguard.proxy.guard.records import reporting
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.providers import registry
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.store.records import RecordSink, TripRecord

log = logging.getLogger("runguard.guard")

BREAKER_SCOPES = (Scope.KEY_MODEL, Scope.KEY, Scope.RUN)


class Decisions:
    """Breakers, trips and local answers for the guard's requests."""

    def __init__(
        self,
        settings: Settings,
        policy: Policy,
        batches: Batches,
        sink: RecordSink,
        observer: Observer,
        clock: Callable[[], float],
        priced: Callable[[Ticket], bool] = lambda _: True,
    ) -> None:
        self._settings = settings
        self._priced = priced  # whether a request's model has a price (its trips' spend says unpriced if not)
        self._policy = policy
        self._batches = batches
        self._sink = sink
        self._observer = observer
        self._clock = clock

    def answer(self, ticket: Ticket, notice: StopNotice, kind: ResponseKind) -> Synthetic:
        """The provider-native answer a stopped request gets, as its detector's `response` names it (`auto`: as
        its client needs, `client_answers`): a stop completion if the dialect has one, else an error (a 400 for
        `refuse`)."""
        adapter, guard = ticket.adapter, self._settings.guard
        kind = client_answers.resolved(kind, ticket.request.client, guard.client_answers)
        if kind is ResponseKind.STOP:
            stop = adapter.stop_response(notice, ticket.request)
            if stop is not None:
                return stop
        status = (
            client_answers.REFUSE_STATUS
            if kind is ResponseKind.REFUSE
            else registry.block_status(adapter.provider, guard)
        )
        return adapter.error_response(notice, stream=ticket.request.stream, status=status)

    def stop(self, ticket: Ticket, finding: Finding) -> Synthetic:
        """Stop the request for a blocking `finding`: the answer it gets (`answer`), the trip named."""
        scope = finding.verdict.scope
        notice = StopNotice(finding.detector, ticket.run_id, finding.verdict.reason, ticket.reset_hint(scope))
        ticket.blocked_by = finding.detector
        return self.answer(ticket, notice, finding.response)

    async def breakers(self, ticket: Ticket) -> accounting.Breakers:
        """The breakers of the request's scopes, read now (all None if the state does not answer)."""
        got = await self._batches.execute(ticket.ids, [Get(scope, breaker.FIELD) for scope in BREAKER_SCOPES])
        if got is None:
            return accounting.Breakers(None, None, None)
        records = {scope: BreakerRecord.loads(value) for scope, value in zip(BREAKER_SCOPES, got, strict=True)}
        return accounting.Breakers(records[Scope.RUN], records[Scope.KEY], records[Scope.KEY_MODEL])

    async def gate(self, ticket: Ticket, breakers: accounting.Breakers) -> None:
        """Answer locally while a breaker is open; admit one probe when its cooldown is over."""
        probes: list[Scope] = []
        cfg = self._settings.guard.breaker
        for scope in BREAKER_SCOPES:
            record = breakers.of(scope)
            gate = breaker.gate(record, self._clock(), cfg.probe_timeout_seconds)
            if gate.kind is GateKind.PROBE and gate.record is not None and gate.candidate is not None:
                won = await self._batches.execute(
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
        kind = config.response if config is not None else ResponseKind.AUTO
        answer = self.answer(ticket, notice, kind)
        if retry and answer.status >= 400:  # an error says when to come back; a stop completion cannot
            answer = dataclasses.replace(answer, headers={**answer.headers, "Retry-After": str(retry)})
        ticket.answer = answer
        ticket.blocked_by = record.detector

    async def act(
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
                await self._batches.execute(ticket.ids, ops)
            return None
        existing = breakers.of(blocking.verdict.scope)
        await self._batches.execute(ticket.ids, [self._open_ops(ticket, blocking, existing)])
        if answers and ticket.answer is None and not ticket.blocked_by:
            ticket.answer = self.stop(ticket, blocking)
        return blocking

    def _trip_record(self, ticket: Ticket, finding: Finding, seen: ResponseSeen | None) -> TripRecord:
        # The run's own limits, as its headers tightened them (its lineup's), else its key's and model's.
        configs = ticket.lineup.configs
        cap = configs.get("max_requests") or self._policy.config_of(
            "max_requests", ticket.key_hash, ticket.request.model
        )
        budget = configs.get("budget") or self._policy.config_of("budget", ticket.key_hash, ticket.request.model)
        step_cap, texts = int(getattr(cap, "limit", MaxRequestsConfig().limit)), self._settings.store.record_bodies
        usd = getattr(budget, "run_usd", None)
        unpriced = not self._priced(ticket)
        return reporting.trip_record(
            ticket, finding, seen, self._clock(), step_cap, with_texts=texts, budget=usd, unpriced=unpriced
        )

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
