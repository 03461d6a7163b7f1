"""Ticket: what the guard holds of one request (its run, scopes, lineup, findings), admission to end."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from runguard.detectors.support import RequestSeen, ResponseSeen, Results, RunFacts
from runguard.proxy.core.events import Provider, RequestInfo
from runguard.proxy.core.ops import CompareAndSet, Scope
from runguard.proxy.core.safe_text import reset_command
from runguard.proxy.guard.lineup.engine import NO_DETECTORS, Finding, Lineup, Views
from runguard.proxy.providers.answers import Synthetic
from runguard.proxy.providers.base import Adapter
from runguard.proxy.state import ScopeIds
from runguard.proxy.store.records import TripRecord

CARRIED_CHARS = 500  # characters of warnings kept for the run's next answer


@dataclass(slots=True)
class Ticket:
    """One request from admission to completion."""

    run_id: str
    key_hash: str
    ids: ScopeIds
    seen: RequestSeen
    adapter: Adapter
    nests: bool = False  # no X-Run-Id: threads its tool calls start join this run (see `nesting`)
    tenant: str = ""  # whose run it is (`tenants`): `ids.run` is the run's state id in that tenant
    facts: RunFacts | None = None  # None when state was unavailable (detectors skipped)
    lineup: Lineup = NO_DETECTORS
    before: dict[str, Results] = field(default_factory=dict)
    warnings: list[Finding] = field(default_factory=list)
    probes: tuple[Scope, ...] = ()
    probe_undo: list[CompareAndSet] = field(default_factory=list)  # reverts the probes claimed
    answer: Synthetic | None = None  # set when the request is answered locally
    blocked_by: str | None = None
    full: str | None = None  # why the state refused this new run (`StateFull`), if it did
    trips: list[TripRecord] = field(default_factory=list)
    inspected: list[Finding] | None = None  # inspect_response findings, once run
    views: Views | None = None  # the response as each detector sees it, once built
    carried: str | None = None  # warnings found after the run's previous response, shown on this one
    proxy_url: str | None = None  # the `--url` a reset command needs (None: the default address)
    # The request's own credentials, read when an upstream error text must be masked (`keys.redact`).
    credentials: Callable[[], tuple[str, ...]] = tuple
    # The provider the request goes to, when its dialect's is not it: Gemini's OpenAI-compatible Chat is
    # recorded and counted as provider gemini, api chat (`provider`).
    upstream: Provider | None = None
    notes: tuple[str, ...] = ()  # per-run header entries not applied because they would loosen the policy
    nudged: frozenset[str] = frozenset()  # detectors that nudged the run before: they block if they fire again
    note: str | None = None  # a nudge's note this request carries to the model (`nudge`)
    started: float = field(default_factory=time.perf_counter)
    traceparent: str | None = None  # the agent's W3C trace context, if its request carried one (`telemetry`)
    tracestate: str | None = None

    @staticmethod
    def carried_text(late: list[Finding]) -> str:
        """Warnings found once the response's headers were sent, as the run's next answer shows them
        (bounded: they wait in the run's state)."""
        return "; ".join(f"{_label(w)} (previous response): {w.verdict.reason}" for w in late)[:CARRIED_CHARS]

    @property
    def provider(self) -> Provider:
        """Whom the request is for: its upstream (records and metrics name it); the adapter's own
        provider is the dialect the client reads (error shapes, synthetic answers)."""
        return self.upstream or self.adapter.provider

    @property
    def request(self) -> RequestInfo:
        return self.seen.request

    @property
    def nested(self) -> bool:
        """The request is in a thread nested in its run: per-thread detectors keep that thread's state."""
        return self.ids.thread != self.ids.run

    def views_of(self, seen: ResponseSeen) -> Views:
        """The per-detector views of `seen`, built on first use (inspect and complete share them)."""
        if self.views is None or self.views.seen is not seen:
            self.views = Views.of(seen, self.before, self.lineup.responders)
        return self.views

    def warning_header(self) -> str | None:
        """`x-runguard-warning`: every non-blocking finding so far, and those carried from the run's
        previous response; ASCII-safe and bounded."""
        warnings = self.warnings + [f for f in self.inspected or () if not f.blocking]
        parts = [f"{_label(w)}: {w.verdict.reason}" for w in warnings]
        if self.carried:
            parts.append(self.carried)
        parts += self.notes
        if not parts:
            return None
        return "; ".join(parts).encode("ascii", "replace").decode()[:1000].replace("\r", " ").replace("\n", " ")

    def reset_hint(self, scope: Scope) -> str:
        """How a user reopens what this request tripped: a command whose client-chosen words are quoted."""
        url = self.proxy_url
        if scope is Scope.RUN:
            return f"Reset with: {reset_command(run_id=self.run_id, url=url)}"
        if scope is Scope.KEY_MODEL:
            command = reset_command(key=self.ids.key, model=self.request.model, url=url)
            return f"It closes after its cooldown, or: {command}"
        return f"Reset with: {reset_command(key=self.ids.key, url=url)}"


def _label(finding: Finding) -> str:
    """A warning's detector, marked when its finding nudged the model (a note went to it with the request)."""
    return f"{finding.detector} (nudge)" if finding.nudge else finding.detector


@functools.lru_cache(maxsize=4)
def _utc_day(day: int) -> str:
    """The date of the `day`-th UTC day since the epoch, as `YYYY-MM-DD`: formatted once a day, not per request."""
    return time.strftime("%Y-%m-%d", time.gmtime(day * 86400))


def scope_ids(run_id: str, key_hash: str, model: str, now: float, thread: str = "") -> ScopeIds:
    """`thread`: the id of the conversation nested in the run that the request belongs to, if any."""
    day = _utc_day(int(now // 86400))
    return ScopeIds(
        run=run_id,
        key=key_hash,
        key_model=f"{key_hash}|{model}",
        key_day=f"{key_hash}|{day}",
        thread=thread or run_id,
    )
