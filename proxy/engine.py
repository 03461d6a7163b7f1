"""Runs detectors: one state batch per phase, faults isolated.

The engine asks every armed detector for its plan, prefixes each op's field
with the detector's name (so detectors cannot touch each other's state),
concatenates the plans after the guard's own ops into one batch, and after the
batch ran hands each detector its own results. A detector that raises is
reported through `on_fault` and ignored for this request (fail open).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runguard.detectors.base import (
    Action,
    Detector,
    DetectorConfig,
    RequestSeen,
    ResponseKind,
    ResponseSeen,
    Results,
    RunFacts,
    Verdict,
)
from runguard.detectors.ops import Op, OpResult, renamed

FaultHandler = Callable[[str, str, BaseException], None]  # detector, hook, exception


@dataclass(frozen=True, slots=True)
class Armed:
    """A detector with the configuration in force for this request."""

    detector: Detector[Any]
    config: DetectorConfig
    name: str = field(init=False)  # the detector's name, read many times per request

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.detector.name)


@dataclass(frozen=True, slots=True)
class Finding:
    """A verdict with what to do about it."""

    verdict: Verdict
    blocking: bool  # action is block (and shadow mode is off)
    response: ResponseKind

    @property
    def detector(self) -> str:
        return self.verdict.detector


@dataclass(frozen=True, slots=True)
class Batch:
    """Every detector's ops, appended after `offset` ops of the guard's own."""

    ops: tuple[Op, ...]
    members: tuple[Armed, ...]  # every detector armed for the request, planning or not
    slices: Mapping[str, tuple[tuple[str, int], ...]]  # detector -> (local name, index into the results)

    def split(self, results: Sequence[OpResult]) -> list[tuple[Armed, Results]]:
        return [(armed, {name: results[i] for name, i in self.slices.get(armed.name, ())}) for armed in self.members]


def _namespaced(op: Op, prefix: str) -> Op:
    return renamed(op, f"{prefix}.{op.field}")


def _own(seen: ResponseSeen, before: dict[str, Results], name: str) -> ResponseSeen:
    """`seen` with one detector's request-phase results; most have none and share `seen` as is."""
    got = before.get(name)
    return dataclasses.replace(seen, before=got) if got else seen


HOOKS = ("plan_request", "check_request", "inspect_response", "plan_response", "check_response")


def _overridden(cls: type[Detector[Any]]) -> frozenset[str]:
    return frozenset(hook for hook in HOOKS if getattr(cls, hook) is not getattr(Detector, hook))


class Engine:
    def __init__(self, on_fault: FaultHandler, shadow: bool = False) -> None:
        self._on_fault = on_fault
        self._shadow = shadow
        self._hooks: dict[type[Detector[Any]], frozenset[str]] = {}

    def _with(self, armed: Sequence[Armed], hook: str) -> list[Armed]:
        """Only the detectors that implement `hook` (most implement two of the five)."""
        selected = []
        for one in armed:
            cls = type(one.detector)
            hooks = self._hooks.get(cls)
            if hooks is None:
                hooks = self._hooks[cls] = _overridden(cls)
            if hook in hooks:
                selected.append(one)
        return selected

    def _finding(self, armed: Armed, verdict: Verdict | None) -> Finding | None:
        if verdict is None:
            return None
        blocking = armed.config.action is Action.BLOCK and not verdict.advisory and not self._shadow
        return Finding(verdict, blocking, armed.config.response)

    def _plan(self, armed: Sequence[Armed], offset: int, hook: str, call: Callable[[Armed], Any]) -> Batch:
        ops: list[Op] = []
        slices: dict[str, tuple[tuple[str, int], ...]] = {}
        for one in self._with(armed, hook):
            try:
                plan = call(one)
            except Exception as exc:
                self._on_fault(one.name, hook, exc)
                continue
            names = []
            for local, op in plan.items():
                names.append((local, offset + len(ops)))
                ops.append(_namespaced(op, one.name))
            slices[one.name] = tuple(names)
        return Batch(tuple(ops), tuple(armed), slices)

    def _check(self, pairs: Sequence[tuple[Armed, Any]], hook: str, call: Callable[[Armed, Any], Any]) -> list[Finding]:
        findings = []
        wanted = {id(a) for a in self._with([a for a, _ in pairs], hook)}
        for armed, extra in pairs:
            if id(armed) not in wanted:
                continue
            try:
                finding = self._finding(armed, call(armed, extra))
            except Exception as exc:
                self._on_fault(armed.name, hook, exc)
                continue
            if finding is not None:
                findings.append(finding)
        return findings

    def plan_request(self, armed: Sequence[Armed], seen: RequestSeen, offset: int) -> Batch:
        return self._plan(armed, offset, "plan_request", lambda a: a.detector.plan_request(seen, a.config))

    def check_request(
        self, batch: Batch, results: Sequence[OpResult], seen: RequestSeen, facts: RunFacts
    ) -> tuple[list[Finding], dict[str, Results]]:
        """Findings, and each detector's results (kept for its response phase)."""
        pairs = batch.split(results)
        findings = self._check(
            pairs, "check_request", lambda a, got: a.detector.check_request(seen, facts, got, a.config)
        )
        return findings, {armed.name: got for armed, got in pairs}

    def inspect_response(self, armed: Sequence[Armed], seen: ResponseSeen, before: dict[str, Results]) -> list[Finding]:
        pairs = [(a, _own(seen, before, a.name)) for a in self._with(armed, "inspect_response")]
        return self._check(pairs, "inspect_response", lambda a, s: a.detector.inspect_response(s, a.config))

    def plan_response(
        self, armed: Sequence[Armed], seen: ResponseSeen, before: dict[str, Results], offset: int
    ) -> Batch:
        def call(a: Armed) -> Any:
            return a.detector.plan_response(_own(seen, before, a.name), a.config)

        return self._plan(armed, offset, "plan_response", call)

    def check_response(
        self, batch: Batch, results: Sequence[OpResult], seen: ResponseSeen, before: dict[str, Results]
    ) -> list[Finding]:
        def call(a: Armed, got: Results) -> Verdict | None:
            return a.detector.check_response(_own(seen, before, a.name), got, a.config)

        return self._check(batch.split(results), "check_response", call)
