"""`max_tokens`: a token cap, input plus output tokens over a whole run, cache reads weighed at their price.

A coding-agent CLI re-sends its 20-70k-token conversation on every request, most of it read from the
provider's prompt cache at a tenth of the input price or less (86% of the prompt tokens of the recorded
coding sessions were cache reads). Counted like fresh tokens, a healthy session reached 2,000,000 in 59 to
94 calls; counted at a tenth (`cached_weight`), a developer's two-hour Claude Code session of 371 calls
reaches about 4.3M (30M tokens sent). The run's cache reads are counted here, from each response's usage.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    Results,
    RunFacts,
    Verdict,
)
from runguard.proxy.core.ops import Add, Get, Scope

CACHED = "cached"  # the run's cache-read input tokens


class MaxTokensConfig(DetectorConfig):
    limit: int = Field(
        5_000_000,
        ge=1,
        description="Input plus output tokens one run may use (cache reads weighed by `cached_weight`); once "
        "reached, its next request is stopped. Every step re-sends the whole conversation: real coding "
        "sessions send 10-30k-token contexts per step (coding-agent CLIs 50-100k, mostly cache reads) and make "
        "up to 371 calls; the most a recorded session used is 30M tokens, 4.3M weighed (Claude Code, two "
        "hours of interactive work; usage reconstructed from its export), then 3.1M (212 calls) and 2.0M.",
        json_schema_extra={"tighten": "lower"},
    )
    cached_weight: float = Field(
        0.1,
        ge=0,
        le=1,
        description="What one cache-read input token counts for against `limit`: its price against a fresh "
        "input token's (a tenth at Anthropic, Gemini 3 and GPT-5; a quarter on Gemini 2.5, a half on GPT-4o). "
        "1 counts it as a fresh token.",
        json_schema_extra={"tighten": "higher"},
    )


class MaxTokens(Detector[MaxTokensConfig]):
    """Pre-flight: the run's tokens so far against the cap; after each response, its cache reads counted."""

    name = "max_tokens"
    Config = MaxTokensConfig

    def plan_request(self, seen: RequestSeen, cfg: MaxTokensConfig) -> Plan:
        return {CACHED: Get(Scope.RUN, CACHED)} if cfg.cached_weight < 1 else {}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: MaxTokensConfig) -> Verdict | None:
        raw = facts.input_tokens + facts.output_tokens
        if raw < cfg.limit:
            return None  # weighed, the count is never more
        stored = got.get(CACHED)
        cached = min(int(stored), facts.input_tokens) if isinstance(stored, float) else 0
        used = raw - cached + int(cached * cfg.cached_weight)
        if used >= cfg.limit:
            return self.verdict(
                f"run used {used:,} tokens, reaching its limit of {cfg.limit:,}"
                + (f" (its {cached:,} cache-read tokens counted at {cfg.cached_weight:g})" if cached else ""),
                shows=Evidence(value=used, limit=cfg.limit),
                tokens=used,
                input_tokens=facts.input_tokens,
                output_tokens=facts.output_tokens,
                cached_tokens=cached,
            )
        return None

    def plan_response(self, seen: ResponseSeen, cfg: MaxTokensConfig) -> Plan:
        usage = seen.response.usage
        if usage is None or not usage.cached_tokens or cfg.cached_weight >= 1:
            return {}
        return {CACHED: Add(Scope.RUN, CACHED, min(usage.cached_tokens, usage.input_tokens))}
