"""`retry_cascade`: consecutive upstream failures for one API key and model.

SDK retries stacked under application retries turn one failing turn into many
calls against an exhausted quota. This detector only says when the failures
are consecutive enough; the key+model breaker it opens (cooldown, doubling,
half-open probe) is run by the guard.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, Plan, ResponseSeen, Results, Verdict
from runguard.proxy.core.ops import Add, Put, Scope


class RetryCascadeConfig(DetectorConfig):
    failures: int = Field(
        2,
        ge=1,
        description="Consecutive upstream failures (no response, 429, 5xx, or an error in the stream) "
        "for one API key and model that open its breaker; any success resets the count.",
        json_schema_extra={"tighten": "lower"},
    )


class RetryCascade(Detector[RetryCascadeConfig]):
    """After each response: count a failure, or reset the count on success."""

    name = "retry_cascade"
    stays_stopped = False  # a key's upstream heals: its breaker closes after a cooldown through one probe
    nudges = False  # the model cannot mend an upstream
    Config = RetryCascadeConfig

    def plan_response(self, seen: ResponseSeen, cfg: RetryCascadeConfig) -> Plan:
        if seen.upstream_failed:
            return {"fails": Add(Scope.KEY_MODEL, "fails", 1)}
        return {"reset": Put(Scope.KEY_MODEL, "fails", None)}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: RetryCascadeConfig) -> Verdict | None:
        fails = got.get("fails")
        if not isinstance(fails, float) or fails < cfg.failures:
            return None
        status = "no response" if seen.status is None else f"status {seen.status}"
        return self.verdict(
            f"{int(fails)} consecutive upstream failures for model '{seen.request.model}' "
            f"(last: {status}), limit {cfg.failures}",
            Scope.KEY_MODEL,
            shows=Evidence(value=int(fails), limit=cfg.failures),
            failures=int(fails),
            status=seen.status,
            error=(seen.response.error or "")[:200],
            model=seen.request.model,
        )
