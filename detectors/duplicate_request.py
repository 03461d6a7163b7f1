"""`duplicate_request`: the same request body sent again and again, back to back.

Retry layers multiply (SDK retries times application retries), and each
identical request re-bills the whole context. The SDKs retry twice by default,
so three identical bodies in a row is normal; more is amplification. A retry
is sent once the attempt before it is over (failed, or given up on: the proxy
lets go of an attempt its client left), so a body sent while another request
of the run is still out is a parallel sample (five samples of one prompt at
once, to vote or pick the best), not a retry, and is not stopped.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, Plan, RequestSeen, Results, RunFacts, Verdict
from runguard.proxy.core.ops import Push, Scope


class DuplicateRequestConfig(DetectorConfig):
    max_repeats: int = Field(
        4,
        ge=2,
        le=32,
        description="Identical request bodies in a row that stop the run; this many identical sends is "
        "one more than an SDK's default retries produce. One sent while another request of the run is still "
        "out is a parallel sample, not a retry.",
        json_schema_extra={"tighten": "lower"},
    )


class DuplicateRequest(Detector[DuplicateRequestConfig]):
    """Pre-flight: a window of the run's last body hashes, all equal once full."""

    name = "duplicate_request"
    stays_stopped = False  # a client's retries of a slow upstream: its breaker closes after a cooldown
    nudges = False  # the client re-sends, not the model
    Config = DuplicateRequestConfig

    def plan_request(self, seen: RequestSeen, cfg: DuplicateRequestConfig) -> Plan:
        if not seen.body_hash:
            return {}
        return {"bodies": Push(Scope.RUN, "bodies", (seen.body_hash,), keep=cfg.max_repeats)}

    def check_request(
        self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DuplicateRequestConfig
    ) -> Verdict | None:
        bodies = got.get("bodies")
        if not isinstance(bodies, tuple) or len(bodies) < cfg.max_repeats or len(set(bodies)) != 1:
            return None
        if facts.in_flight > 1:
            return None  # sent while another request of the run is still out: a parallel sample, not a retry
        return self.verdict(
            f"the same request body was sent {cfg.max_repeats} times in a row",
            shows=Evidence(value=len(bodies), limit=cfg.max_repeats),
            body_hash=seen.body_hash,
            repeats=cfg.max_repeats,
        )
