"""What a replay means per detector: the sessions it would stop (where, out of how many calls, why) and
the share of responses that carry its warnings, with totals over every replayed session.

A replay of a corpus is many `ReplayReport`s (one per recorded file, each over fresh state); a
`Summary` adds them up. A session's calls are every recorded request of it: those the guard let
through (its responses) and those after a stop (avoided). A response carries a warning when any
detector warned on its request (action `warn`); a nudge (a note added for the model) is counted
apart, as it changes what the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from runguard.proxy.guard.offline.replay import ReplayReport


@dataclass(frozen=True, slots=True)
class Stop:
    """One session a detector would have stopped."""

    run_id: str
    detector: str
    at_call: int  # the call the proxy would have answered itself (1-based)
    of_calls: int  # how many calls the session made as recorded
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""  # the file it came from, when replaying a folder


@dataclass(slots=True)
class DetectorFigures:
    stops: list[Stop] = field(default_factory=list)
    warned_responses: int = 0
    nudged_responses: int = 0


@dataclass(slots=True)
class Summary:
    sessions: int = 0
    calls: int = 0  # recorded requests, let through or after a stop
    responses: int = 0  # requests let through (their answers reached the agent)
    warned_responses: int = 0
    nudged_responses: int = 0
    unpriced: int = 0  # responses whose model has no price (their cost is unknown)
    skipped: int = 0
    files: int = 0
    detectors: dict[str, DetectorFigures] = field(default_factory=dict)

    @property
    def stops(self) -> list[Stop]:
        return [stop for figures in self.detectors.values() for stop in figures.stops]

    def share(self, count: int) -> float:
        return count / self.responses if self.responses else 0.0

    def add(self, report: ReplayReport, source: str = "") -> None:
        """Count one replay's runs, stops and warnings in."""
        self.files += 1
        self.skipped += report.skipped
        blocks = {(t.run_id, t.detector): t for t in report.trips if t.action == "block"}  # the last of each
        for run in report.runs.values():
            self.sessions += 1
            self.calls += run.requests + run.avoided_requests
            self.responses += run.requests
            self.unpriced += run.unpriced
            if run.stopped_at is None:
                continue
            detector = run.detector or "breaker"
            trip = blocks.get((run.run_id, detector))
            stop = Stop(
                run.run_id, detector, run.stopped_at, run.requests + run.avoided_requests,
                run.reason or "", dict(trip.evidence) if trip else {}, source,
            )  # fmt: skip
            self.detectors.setdefault(detector, DetectorFigures()).stops.append(stop)
        marked: dict[tuple[str, str], set[tuple[str, int]]] = {}  # (action, detector or "") -> requests
        for trip in report.trips:
            if trip.action in {"warn", "nudge"}:
                request = (trip.run_id, trip.request_index)
                marked.setdefault((trip.action, trip.detector), set()).add(request)
                marked.setdefault((trip.action, ""), set()).add(request)
        for (action, detector), requests in marked.items():
            counted: DetectorFigures | Summary = (
                self.detectors.setdefault(detector, DetectorFigures()) if detector else self
            )
            if action == "warn":
                counted.warned_responses += len(requests)
            else:
                counted.nudged_responses += len(requests)

    def as_json(self) -> dict[str, Any]:
        stopped = {stop.run_id for stop in self.stops}
        return {
            "sessions": self.sessions,
            "calls": self.calls,
            "responses": self.responses,
            "sessions_stopped": len(stopped),
            "warned_responses": self.warned_responses,
            "warning_share": round(self.share(self.warned_responses), 4),
            "nudged_responses": self.nudged_responses,
            "unpriced": self.unpriced,
            "skipped": self.skipped,
            "files": self.files,
            "detectors": {
                name: {
                    "sessions_stopped": len(figures.stops),
                    "warned_responses": figures.warned_responses,
                    "warning_share": round(self.share(figures.warned_responses), 4),
                    "nudged_responses": figures.nudged_responses,
                    "stops": [{**asdict(stop), "evidence": dict(stop.evidence)} for stop in figures.stops],
                }
                for name, figures in sorted(self.detectors.items())
            },
        }
