"""`session_bloat`: a run whose very first request already carries a long history.

That is a stored session re-loaded on every run (a fixed session id reused
daily): each run then pays for all the earlier ones before its first step.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.base import Detector, DetectorConfig, RequestSeen, Results, RunFacts, Verdict


class SessionBloatConfig(DetectorConfig):
    max_history_chars: int = Field(
        60_000,
        ge=1,
        description="Characters of conversation the first request of a run may carry when it already holds "
        "earlier assistant turns. A first request with one large user document and no prior turns "
        "is never counted.",
        json_schema_extra={"tighten": "lower"},
    )


class SessionBloat(Detector[SessionBloatConfig]):
    """Pre-flight, first request of a run only."""

    name = "session_bloat"
    Config = SessionBloatConfig

    def check_request(
        self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: SessionBloatConfig
    ) -> Verdict | None:
        request = seen.request
        if facts.request_index != 1 or request.assistant_turns == 0:
            return None
        if request.history_chars <= cfg.max_history_chars:
            return None
        return self.verdict(
            f"the run's first request already carries {request.history_chars:,} characters of history "
            f"({request.assistant_turns} earlier assistant turns), over the limit of {cfg.max_history_chars:,}",
            history_chars=request.history_chars,
            assistant_turns=request.assistant_turns,
            limit=cfg.max_history_chars,
        )
