"""`max_tokens`: a token cap, input plus output tokens over a whole run."""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support.base import Detector, DetectorConfig, Evidence, RequestSeen, Results, RunFacts, Verdict


class MaxTokensConfig(DetectorConfig):
    limit: int = Field(
        2_000_000,
        ge=1,
        description="Input plus output tokens one run may use; once reached, its next request is stopped. "
        "Every step re-sends the whole conversation, and real agents send 10-30k-token contexts per "
        "step, so a 50-step run uses about a million tokens: the default leaves room for that, not for a "
        "runaway loop.",
        json_schema_extra={"tighten": "lower"},
    )


class MaxTokens(Detector[MaxTokensConfig]):
    """Pre-flight: the run's tokens so far against the cap."""

    name = "max_tokens"
    Config = MaxTokensConfig

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: MaxTokensConfig) -> Verdict | None:
        used = facts.input_tokens + facts.output_tokens
        if used >= cfg.limit:
            return self.verdict(
                f"run used {used:,} tokens, reaching its limit of {cfg.limit:,}",
                shows=Evidence(value=used, limit=cfg.limit),
                tokens=used,
                input_tokens=facts.input_tokens,
                output_tokens=facts.output_tokens,
            )
        return None
