"""`max_requests`: a step cap, the number of model requests one run may make."""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, RequestSeen, Results, RunFacts, Verdict


class MaxRequestsConfig(DetectorConfig):
    limit: int = Field(
        500,
        ge=1,
        description="Model requests one run may make; the request after the last allowed one is stopped. "
        "Real coding agents fixing one repository issue make 50 to 150 calls (a fifth of the recorded coding "
        "sessions make 100 or more), and their own step limits are 150-250; a developer working with Claude "
        "Code for two hours, new prompts in one conversation, made 371 calls in one run (the longest of 772 "
        "recorded sessions): the default is past them. Set it to about twice the steps your hardest legitimate "
        "task needs.",
        json_schema_extra={"tighten": "lower"},
    )


class MaxRequests(Detector[MaxRequestsConfig]):
    """Pre-flight: the run's request count, this request included, against the cap.

    A Realtime session's responses are its caller's turns, not an agent's steps: a long call
    is not stopped for its length (its budget still counts).
    """

    name = "max_requests"
    Config = MaxRequestsConfig

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: MaxRequestsConfig) -> Verdict | None:
        if facts.request_index > cfg.limit and not seen.request.session_turn:
            return self.verdict(
                f"request {facts.request_index} exceeds the run's limit of {cfg.limit} requests",
                shows=Evidence(value=facts.request_index, limit=cfg.limit),
                requests=facts.request_index,
            )
        return None
