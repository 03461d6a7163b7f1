"""`over_spawn`: too many requests of one run in flight at once.

A fan-out built from a tool's output (one sub-agent per item) normally spawns
a handful of parallel calls; a broken index or cursor can make it hundreds.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, RequestSeen, Results, RunFacts, Verdict


class OverSpawnConfig(DetectorConfig):
    max_in_flight: int = Field(
        20,
        ge=1,
        description="Requests of one run that may be under way at the same time; one more is stopped. "
        "Pipelines that normally fan out to 5-10 parallel agents have headroom at 20.",
        json_schema_extra={"tighten": "lower"},
    )


class OverSpawn(Detector[OverSpawnConfig]):
    """Pre-flight: the run's in-flight count, this request included."""

    name = "over_spawn"
    nudges = False  # requests in flight are the client's doing, not one model turn's
    Config = OverSpawnConfig

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: OverSpawnConfig) -> Verdict | None:
        if facts.in_flight > cfg.max_in_flight:
            return self.verdict(
                f"{facts.in_flight} requests of this run in flight at once, over the limit of {cfg.max_in_flight}",
                shows=Evidence(value=facts.in_flight, limit=cfg.max_in_flight),
                in_flight=facts.in_flight,
            )
        return None
