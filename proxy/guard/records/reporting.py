"""Turning a finished request into records: content-free, keys never included."""

from __future__ import annotations

import time

from runguard.detectors.support import ResponseSeen
from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.guard import unreadable
from runguard.proxy.guard.lineup.engine import Finding
from runguard.proxy.guard.records import evidence
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.runs import Pending
from runguard.proxy.store import costs
from runguard.proxy.store.records import RecordedBody, RequestRecord, TripRecord, VerdictRecord


def trip_record(
    ticket: Ticket,
    finding: Finding,
    seen: ResponseSeen | None,
    at: float,
    step_cap: int,
    *,
    with_texts: bool = False,
    budget: float | None = None,
    unpriced: bool = False,
) -> TripRecord:
    """A finding as a trip; `usd_avoided_estimate` is `costs.avoided_estimate` (0 unless it blocks).
    `with_texts` (`store.record_bodies`): the evidence's calls that this request or response carries get their
    text (`evidence.with_content`); `unpriced`: the request's model has no price.

    The spend so far (USD and tokens alike) includes the response `seen`, when the finding
    was made after one."""
    facts = ticket.facts
    index = facts.request_index if facts else 0
    usage = seen.response.usage if seen is not None else None
    spent = (facts.usd if facts else 0.0) + (seen.usd if seen is not None else 0.0)
    tokens = (facts.input_tokens + facts.output_tokens) if facts else 0
    tokens += (usage.input_tokens + usage.output_tokens) if usage else 0
    return TripRecord(
        run_id=ticket.run_id,
        key_hash=ticket.key_hash,
        detector=finding.detector,
        action=finding.action,
        reason=finding.verdict.reason,
        scope=finding.verdict.scope.value,
        request_index=index,
        at=at,
        usd_so_far=spent,
        tokens_so_far=tokens,
        usd_avoided_estimate=costs.avoided_estimate(finding.action, spent, index, step_cap, budget, finding.detector),
        evidence=(
            evidence.with_content(finding.verdict.evidence, ticket.request, seen.response if seen else None)
            if with_texts
            else dict(finding.verdict.evidence)
        ),
        model=ticket.request.model,
        unpriced=unpriced,
    )


def request_record(
    ticket: Ticket,
    seen: ResponseSeen | None,
    status: int | None,
    error: str | None,
    body: RecordedBody | None,
    *,
    unpriced: bool = False,
) -> RequestRecord:
    """The record of `ticket`'s request; `unpriced`: its model has no price (`ResponseReader.cost` is None)."""
    request = ticket.request
    response = seen.response if seen is not None else None
    usage = response.usage if response is not None else None
    latency = seen.latency if seen is not None else 0.0
    error = error or (response.error[:200] if response and response.error else None)
    if request.parse_error:
        error = unreadable.record_error(request.parse_error, error)
    return RequestRecord(
        run_id=ticket.run_id,
        key_hash=ticket.key_hash,
        index=ticket.facts.request_index if ticket.facts else 0,
        at=ticket.seen.now,
        agent=request.agent.label,
        model=request.model,
        provider=str(ticket.provider),
        api=str(request.api),
        streamed=request.stream,
        status=status,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        cached_tokens=usage.cached_tokens if usage else 0,
        reasoning_tokens=usage.reasoning_tokens if usage else 0,
        usage_estimated=usage.estimated if usage else False,
        usd=seen.usd if seen else 0.0,
        unpriced=unpriced,
        upstream_ms=latency * 1000 if seen else None,
        overhead_ms=max(0.0, (time.perf_counter() - ticket.started - latency) * 1000),
        tool_calls=tuple(c.name for c in response.tool_calls) if response else (),
        handoff_to=response.handoffs[0].target if response and response.handoffs else None,
        finish_reason=response.finish_reason if response else None,
        blocked_by=ticket.blocked_by,
        error=error,
        verdicts=tuple(VerdictRecord(t.detector, t.action, t.reason) for t in ticket.trips),
        body=body,
    )


def polled_record(
    run_id: str,
    pending: Pending,
    response: ResponseInfo,
    *,
    at: float,
    usd: float | None,
    streamed: bool,
    status: int,
    latency: float,
    began: float,
) -> RequestRecord:
    """The record of the poll that found a background response finished: its usage, cost and tool calls,
    under the index of the request that started it (`polled`: no request of its own in the run's totals);
    `usd` None: the model has no price."""
    usage = response.usage
    return RequestRecord(
        run_id=run_id,
        key_hash=pending.key_hash,
        index=pending.index,
        at=at,
        agent=pending.agent,
        model=pending.model,
        provider="openai",
        api="responses",
        streamed=streamed,
        status=status,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        cached_tokens=usage.cached_tokens if usage else 0,
        reasoning_tokens=usage.reasoning_tokens if usage else 0,
        usd=usd or 0.0,
        unpriced=usd is None,
        upstream_ms=latency * 1000,
        overhead_ms=max(0.0, (time.perf_counter() - began - latency) * 1000),
        tool_calls=tuple(c.name for c in response.tool_calls),
        handoff_to=response.handoffs[0].target if response.handoffs else None,
        finish_reason=response.finish_reason,
        error=response.error[:200] if response.error else None,
        polled=True,
    )
