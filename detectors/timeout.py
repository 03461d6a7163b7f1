"""`timeout`: a wall-clock cap, seconds since the run's first request."""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, RequestSeen, Results, RunFacts, Verdict


class TimeoutConfig(DetectorConfig):
    seconds: float = Field(
        21_600.0,
        gt=0,
        description="Seconds a run may last, counted from its first request; a later request is stopped. Real "
        "coding sessions fixing an issue take up to an hour at their agents' pace (recorded: 28, 35 and 55 "
        "minutes), and a coding-agent CLI building and watching a long build 4 h 33 min (57 calls): the "
        "default, 6 hours, is past them. Request and spend caps stop a runaway long before.",
        json_schema_extra={"tighten": "lower"},
    )


class Timeout(Detector[TimeoutConfig]):
    """Pre-flight: time since the run began against the cap.

    A Realtime session lasts as long as its caller talks: a long call is not stopped for its
    length (its budget still counts).
    """

    name = "timeout"
    Config = TimeoutConfig

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: TimeoutConfig) -> Verdict | None:
        elapsed = seen.now - facts.started_at
        if elapsed > cfg.seconds and not seen.request.session_turn:
            return self.verdict(
                f"run has lasted {elapsed:.0f} s, over its limit of {cfg.seconds:.0f} s",
                shows=Evidence(value=round(elapsed, 3), limit=cfg.seconds),
                elapsed_seconds=round(elapsed, 3),
            )
        return None
