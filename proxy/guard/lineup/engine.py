"""Runs detectors: an Armed detector (one with its config in force), a Lineup (those armed for a request).

One state batch per phase, faults isolated.

The engine asks every armed detector for its plan, prefixes each op's field
with the detector's name (so detectors cannot touch each other's state),
concatenates the plans after the guard's own ops into one batch, and after the
batch ran hands each detector its own results. A detector that raises (or
plans something that is not an op) is reported through `on_fault` and
ignored for the rest of that phase: a failed plan is not checked (fail open).

This runs for every request, so the work is sorted once where it can be: a
`Lineup` (compiled once per key, model and per-run headers, and cached by the
`Policy`) lists, per hook, only the detectors that implement it, and again per
shape of request and response (`shapes`: tool results sent back or not, calls
in the last turn or not, tools the response may call or not) only those whose
hooks can plan or find anything for it; `Views` builds the per-detector view of
a response once for all three response hooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import field
from types import MappingProxyType
from typing import Any

from runguard.detectors.support import (
    Action,
    Detector,
    DetectorConfig,
    Plan,
    RequestSeen,
    ResponseKind,
    ResponseSeen,
    Results,
    RunFacts,
    Verdict,
)
from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.ops import Op, OpResult, Scope
from runguard.proxy.guard.lineup.shapes import SHAPES, request_shape, requests_fit, responses_fit

FaultHandler = Callable[[str, str, BaseException], None]  # detector, hook, exception
MAX_NAMES = 1024  # state field names kept per detector (some fields are named after tools, which vary)


@frozen
class Armed:
    """A detector with the configuration in force for this request."""

    detector: Detector[Any]
    config: DetectorConfig
    # local field -> state name; the policy hands every lineup's `Armed` of one detector the same dict
    names: dict[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)
    name: str = field(init=False)  # the detector's name, read many times per request
    prefix: str = field(init=False)  # "<name>.": put before every state field the detector names

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.detector.name)
        object.__setattr__(self, "prefix", f"{self.detector.name}.")

    def state_name(self, local: str) -> str:
        """`prefix + local`, built once: every run's state then holds the same key string, not a copy
        of its own (a quarter of a run's memory), and its hash is computed once. At most `MAX_NAMES`
        are kept per detector (shared by all its lineups); names past them are built each time.
        """
        name = self.names.get(local)
        if name is None:
            name = self.prefix + local
            if len(self.names) < MAX_NAMES:
                self.names[local] = name
        return name


def _implements(detector: Detector[Any], hook: str) -> bool:
    return getattr(type(detector), hook) is not getattr(Detector, hook)


@frozen
class Hook:
    """One armed detector's hook of one phase (`plan_request`, ...), bound once per lineup.

    The phases call it for every request: reading the bound method and the config
    from here spares each call a method lookup and two attribute reads.
    """

    armed: Armed
    call: Callable[..., Any]  # the detector's bound method
    name: str = field(init=False)
    config: DetectorConfig = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.armed.name)
        object.__setattr__(self, "config", self.armed.config)

    @classmethod
    def of(cls, armed: Armed, hook: str) -> Hook:
        return cls(armed, getattr(armed.detector, hook))


@frozen
class Lineup:
    """The detectors armed for a request, sorted once by the hooks each implements.

    Most detectors implement two of the five hooks, so each phase walks only
    its own list, and of it only the hooks that fit the request's shape
    (`shapes`): `requests[shape]` and `responses[calls]`, listed once here.
    The policy caches one lineup per (key, model, headers).
    """

    armed: tuple[Armed, ...]
    plans_request: tuple[Hook, ...]
    checks_request: tuple[Hook, ...]
    inspects_response: tuple[Hook, ...]
    plans_response: tuple[Hook, ...]
    checks_response: tuple[Hook, ...]
    configs: Mapping[str, DetectorConfig]
    responders: frozenset[str] = frozenset()  # detectors with a response hook (the ones that need a view)
    per_thread: frozenset[str] = frozenset()  # detectors judging one conversation (`Detector.per_thread`)
    # Per request shape (`shapes.SHAPES`), the request hooks that fit it: (plans, checks).
    requests: tuple[tuple[tuple[Hook, ...], tuple[Hook, ...]], ...] = ()
    # For a response without tool calls, then with: the response hooks that fit it (inspects, plans, checks).
    responses: tuple[tuple[tuple[Hook, ...], tuple[Hook, ...], tuple[Hook, ...]], ...] = ()

    @classmethod
    def of(cls, armed: Iterable[Armed]) -> Lineup:
        every = tuple(armed)

        def having(hook: str) -> tuple[Hook, ...]:
            return tuple(Hook.of(a, hook) for a in every if _implements(a.detector, hook))

        def shaped(shape: int, hooks: tuple[Hook, ...]) -> tuple[Hook, ...]:
            return tuple(h for h in hooks if requests_fit(h.armed.detector, shape))

        def answered(calls: bool, hooks: tuple[Hook, ...]) -> tuple[Hook, ...]:
            return tuple(h for h in hooks if responses_fit(h.armed.detector, calls))

        inspects, plans, checks = having("inspect_response"), having("plan_response"), having("check_response")
        plans_request, checks_request = having("plan_request"), having("check_request")
        return cls(
            every,
            plans_request,
            checks_request,
            inspects,
            plans,
            checks,
            {a.name: a.config for a in every},
            frozenset(h.name for h in (*inspects, *plans, *checks)),
            frozenset(a.name for a in every if a.detector.per_thread),
            tuple((shaped(s, plans_request), shaped(s, checks_request)) for s in SHAPES),
            tuple((answered(c, inspects), answered(c, plans), answered(c, checks)) for c in (False, True)),
        )


NO_DETECTORS = Lineup.of(())


def _in_thread(op: Op) -> Op:
    """A run-scope op moved to the thread scope (other scopes stay)."""
    return dataclasses.replace(op, scope=Scope.THREAD) if op.scope is Scope.RUN else op


@frozen
class Finding:
    """A verdict with what to do about it."""

    verdict: Verdict
    blocking: bool  # action is block (and shadow mode is off), or a nudged run's second finding (`escalated`)
    response: ResponseKind
    nudge: bool = False  # action is nudge (and shadow mode is off): the guard nudges first, then blocks
    latches: bool = False  # a block stops the run until reset (`Detector.stays_stopped`, run scope)

    @property
    def action(self) -> str:
        """As recorded: "block", "nudge" or "warn"."""
        return "block" if self.blocking else "nudge" if self.nudge else "warn"

    def escalated(self) -> Finding:
        """This nudge finding as a block: the run was nudged for it before, and the pattern goes on."""
        verdict = dataclasses.replace(self.verdict, evidence={**self.verdict.evidence, "after_nudge": True})
        return dataclasses.replace(self, verdict=verdict, blocking=True, nudge=False)

    @property
    def detector(self) -> str:
        return self.verdict.detector


NOTHING: Results = MappingProxyType({})
NO_VIEWS: Mapping[str, ResponseSeen] = MappingProxyType({})  # request hooks: every planner sees the one record


@frozen
class Batch:
    """Every detector's ops, appended after `offset` ops of the guard's own."""

    ops: list[Op]
    slices: list[tuple[str, tuple[str, ...], int]]  # (detector, its local names in plan order, first index)
    failed: frozenset[str] = frozenset()  # detectors whose plan raised: not checked this time

    def split(self, results: Sequence[OpResult]) -> dict[str, Results]:
        """Each planning detector's results under the names its plan chose.

        Most plans hold one op: a one-entry dict literal costs a third of a
        comprehension over `enumerate` (callgrind: 1.4k against 3.9k instructions).
        """
        got: dict[str, Results] = {}
        for name, local, start in self.slices:
            if len(local) == 1:
                got[name] = {local[0]: results[start]}
            else:
                got[name] = dict(zip(local, results[start : start + len(local)], strict=True))
        return got


@frozen
class Views:
    """A response as each detector sees it, built once per response.

    A detector whose request plan fetched something sees it as `seen.before`
    (its view in `own`); the others (most) share `seen` itself. The engine reads
    `own.get(name, seen)` in place, a method call fewer per detector and hook.
    """

    seen: ResponseSeen
    own: Mapping[str, ResponseSeen]

    @classmethod
    def of(cls, seen: ResponseSeen, before: Mapping[str, Results], only: Collection[str] | None = None) -> Views:
        """The views of `seen`; `only`: build them just for these detectors (the ones with response hooks)."""
        # Built field by field (dataclasses.replace inspects the class on every call); the
        # engine's tests compare a view with `seen`, so a field added to ResponseSeen and
        # missed here fails them.
        s = seen
        return cls(
            seen,
            {
                name: ResponseSeen(
                    s.run_id, s.key_hash, s.now, s.request, s.response, s.facts, s.status, s.usd, s.latency, got
                )
                for name, got in before.items()
                if got and (only is None or name in only)
            },
        )


class Engine:
    def __init__(self, on_fault: FaultHandler, shadow: bool = False) -> None:
        self._on_fault = on_fault
        self._shadow = shadow

    def _keep(self, findings: list[Finding], hook: Hook, verdict: Verdict) -> None:
        """A check's verdict as a finding; a check that returned something else is at fault (it raises)."""
        if not isinstance(verdict, Verdict):
            raise TypeError(f"a check returned {type(verdict).__name__}, not a Verdict or None")
        action, detector = hook.config.action, hook.armed.detector
        live = not verdict.advisory and not self._shadow
        nudge = action is Action.NUDGE and detector.nudges  # one that cannot nudge (set by a header) blocks
        latches = detector.stays_stopped and verdict.scope in (Scope.RUN, Scope.THREAD)
        blocking = live and (action is Action.BLOCK or (action is Action.NUDGE and not nudge))
        findings.append(Finding(verdict, blocking, hook.config.response, nudge=nudge and live, latches=latches))

    def _batch(
        self,
        planners: Sequence[Hook],
        offset: int,
        hook: str,
        shared: RequestSeen | ResponseSeen,
        own: Mapping[str, ResponseSeen] = NO_VIEWS,
        threaded: frozenset[str] = frozenset(),
    ) -> Batch:
        """Call the `hook` of every planner with (seen, config), `seen` being its own view in `own`, else `shared`.

        Each op is renamed in a plain loop: a lambda per planner and a comprehension per
        plan were two more Python calls per detector.
        `threaded`: the planners whose run-scope ops go to the thread scope (the request is in a
        conversation nested in its run).
        """
        ops: list[Op] = []
        slices: list[tuple[str, tuple[str, ...], int]] = []
        failed: set[str] = set()
        for one in planners:
            start = len(ops)
            name = one.name
            try:
                plan: Plan = one.call(own.get(name, shared) if own else shared, one.config)
                if not plan:
                    continue
                armed = one.armed
                names = armed.names
                for op in plan.values():  # a malformed plan raises here
                    local = op.field
                    ops.append(op.renamed(names.get(local) or armed.state_name(local)))
                if threaded and name in threaded:
                    ops[start:] = [_in_thread(op) for op in ops[start:]]
            except Exception as exc:
                del ops[start:]
                self._on_fault(name, hook, exc)
                failed.add(name)
                continue
            slices.append((name, tuple(plan), offset + start))
        return Batch(ops, slices, frozenset(failed))

    def plan_request(self, lineup: Lineup, seen: RequestSeen, offset: int, nested: bool = False) -> Batch:
        """`nested`: the request is in a thread nested in its run (per-thread detectors keep that thread's state)."""
        threaded = lineup.per_thread if nested else frozenset()
        planners = lineup.requests[request_shape(seen.request)][0]
        return self._batch(planners, offset, "plan_request", seen, threaded=threaded)

    def check_request(
        self, lineup: Lineup, batch: Batch, results: Sequence[OpResult], seen: RequestSeen, facts: RunFacts
    ) -> tuple[list[Finding], dict[str, Results]]:
        """Findings, and each planning detector's results (kept for its response phase)."""
        before = batch.split(results)
        findings: list[Finding] = []
        for one in lineup.requests[request_shape(seen.request)][1]:
            if one.name in batch.failed:
                continue
            try:
                verdict = one.call(seen, facts, before.get(one.name, NOTHING), one.config)
                if verdict is not None:  # anything else raises in _keep: a fault
                    self._keep(findings, one, verdict)
            except Exception as exc:
                self._on_fault(one.name, "check_request", exc)
        return findings, before

    def inspect_response(self, lineup: Lineup, views: Views) -> list[Finding]:
        findings: list[Finding] = []
        own, shared = views.own, views.seen
        for one in lineup.responses[bool(shared.response.tool_calls)][0]:
            try:
                verdict = one.call(own.get(one.name, shared), one.config)
                if verdict is not None:  # anything else raises in _keep: a fault
                    self._keep(findings, one, verdict)
            except Exception as exc:
                self._on_fault(one.name, "inspect_response", exc)
        return findings

    def plan_response(self, lineup: Lineup, views: Views, offset: int, nested: bool = False) -> Batch:
        threaded = lineup.per_thread if nested else frozenset()
        planners = lineup.responses[bool(views.seen.response.tool_calls)][1]
        return self._batch(planners, offset, "plan_response", views.seen, views.own, threaded)

    def check_response(self, lineup: Lineup, batch: Batch, results: Sequence[OpResult], views: Views) -> list[Finding]:
        got_by = batch.split(results)
        findings: list[Finding] = []
        own, shared = views.own, views.seen
        for one in lineup.responses[bool(shared.response.tool_calls)][2]:
            if one.name in batch.failed:
                continue
            try:
                verdict = one.call(own.get(one.name, shared), got_by.get(one.name, NOTHING), one.config)
                if verdict is not None:  # anything else raises in _keep: a fault
                    self._keep(findings, one, verdict)
            except Exception as exc:
                self._on_fault(one.name, "check_response", exc)
        return findings
