"""A request's passage through the guard, from admission to completion."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from runguard.detectors.base import RequestSeen, ResponseSeen, Results, RunFacts
from runguard.detectors.ops import CompareAndSet, Scope
from runguard.proxy.adapters.base import Adapter, Synthetic
from runguard.proxy.engine import NO_DETECTORS, Finding, Lineup, Views
from runguard.proxy.events import RequestInfo
from runguard.proxy.records import TripRecord
from runguard.proxy.state.base import ScopeIds

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
    facts: RunFacts | None = None  # None when state was unavailable (detectors skipped)
    lineup: Lineup = NO_DETECTORS
    before: dict[str, Results] = field(default_factory=dict)
    warnings: list[Finding] = field(default_factory=list)
    probes: tuple[Scope, ...] = ()
    probe_undo: list[CompareAndSet] = field(default_factory=list)  # reverts the probes claimed
    answer: Synthetic | None = None  # set when the request is answered locally
    blocked_by: str | None = None
    trips: list[TripRecord] = field(default_factory=list)
    inspected: list[Finding] | None = None  # inspect_response findings, once run
    views: Views | None = None  # the response as each detector sees it, once built
    carried: str | None = None  # warnings found after the run's previous response, shown on this one
    nudged: frozenset[str] = frozenset()  # detectors that nudged the run before: they block if they fire again
    note: str | None = None  # a nudge's note this request carries to the model (`nudge`)
    started: float = field(default_factory=time.perf_counter)

    @staticmethod
    def carried_text(late: list[Finding]) -> str:
        """Warnings found once the response's headers were sent, as the run's next answer shows them
        (bounded: they wait in the run's state)."""
        return "; ".join(f"{_label(w)} (previous response): {w.verdict.reason}" for w in late)[:CARRIED_CHARS]

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
        if not parts:
            return None
        return "; ".join(parts).encode("ascii", "replace").decode()[:1000].replace("\r", " ").replace("\n", " ")

    def reset_hint(self, scope: Scope) -> str:
        """How a user reopens what this request tripped."""
        if scope is Scope.RUN:
            return f"Reset with: runguard-proxy reset {self.ids.run}"
        model = self.request.model
        if scope is Scope.KEY_MODEL:
            return f"It closes after its cooldown, or: runguard-proxy reset --key {self.ids.key} --model {model}"
        return f"Reset with: runguard-proxy reset --key {self.ids.key}"


def _label(finding: Finding) -> str:
    """A warning's detector, marked when its finding nudged the model (a note went to it with the request)."""
    return f"{finding.detector} (nudge)" if finding.nudge else finding.detector


def scope_ids(run_id: str, key_hash: str, model: str, now: float, thread: str = "") -> ScopeIds:
    """`thread`: the id of the conversation nested in the run that the request belongs to, if any."""
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    return ScopeIds(
        run=run_id,
        key=key_hash,
        key_model=f"{key_hash}|{model}",
        key_day=f"{key_hash}|{day}",
        thread=thread or run_id,
    )
