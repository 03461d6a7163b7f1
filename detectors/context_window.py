"""`context_window`: a request close to filling the model's context window.

Past the window a model silently drops the oldest turns while every token is
still billed, and the agent starts re-doing work it has forgotten.
"""

from __future__ import annotations

import dataclasses

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, RequestSeen, Results, RunFacts, Verdict


class ContextWindowConfig(DetectorConfig):
    warn_ratio: float = Field(
        0.70,
        gt=0,
        le=1,
        description="Share of the model's context window at which a request is flagged with a warning "
        "(never blocked by this figure alone).",
        json_schema_extra={"tighten": "lower"},
    )
    stop_ratio: float = Field(
        0.95,
        gt=0,
        le=1,
        description="Share of the model's context window at which a request is stopped. A real Claude Code "
        "session on Opus 4.5 reached 90% of its 200,000-token window while finishing its work: coding agents "
        "compact their own context near there, and a request past the window fails at the provider anyway.",
        json_schema_extra={"tighten": "lower"},
    )


class ContextWindow(Detector[ContextWindowConfig]):
    """Pre-flight: the larger of the request's own token estimate and the run's last input tokens."""

    name = "context_window"
    Config = ContextWindowConfig

    def check_request(
        self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: ContextWindowConfig
    ) -> Verdict | None:
        window = seen.context_window
        if window <= 0:
            return None
        # The last response's exact count covers what a character-based estimate undercounts.
        tokens = max(seen.request.estimated_input_tokens, facts.last_input_tokens)
        share = tokens / window
        if share < min(cfg.warn_ratio, cfg.stop_ratio):
            return None
        stop = share >= cfg.stop_ratio
        limit = cfg.stop_ratio if stop else cfg.warn_ratio
        found = self.verdict(
            f"about {tokens:,} input tokens fill {share:.0%} of the {window:,}-token context window "
            f"({'stop' if stop else 'warning'} at {limit:.0%})",
            shows=Evidence(value=round(share, 4), limit=limit),
            tokens=tokens,
            window=window,
            share=round(share, 4),
        )
        return found if stop else dataclasses.replace(found, advisory=True)
