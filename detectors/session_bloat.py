"""`session_bloat`: a run whose very first request already carries a long history.

That is a stored session re-loaded on every run (a fixed session id reused
daily): each run then pays for all the earlier ones before its first step.

A run the proxy forgot while it was idle is not new when it comes back: a chat
named by its conversation's `X-Run-Id` and resumed the next morning carries its
own history, not an earlier session's. So each request of a long conversation
leaves a trace of its run that outlives the run's state
(`runs.remember_seconds`), and only a run with no trace is judged. A run without
the header is known by its root only while its root's entry lives (twice the
idle time); after that it is a new run, and judged.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, Plan, RequestSeen, Results, RunFacts, Verdict
from runguard.proxy.core.ops import Put, Scope

TRACED_FROM = 4  # a conversation over this fraction of the limit leaves a trace (it may come back over it)
_SEEN = Put(Scope.RUN_TRACE, "seen", "1")


class SessionBloatConfig(DetectorConfig):
    max_history_chars: int = Field(
        60_000,
        ge=1,
        description="Characters of conversation the first request of a run may carry when it already holds "
        "earlier assistant turns. A first request with one large user document and no prior turns "
        "is never counted, nor a run seen before that comes back after an idle pause "
        "(within runs.remember_seconds).",
        json_schema_extra={"tighten": "lower"},
    )


class SessionBloat(Detector[SessionBloatConfig]):
    """Pre-flight, first request of a run only; requests of long conversations leave the run's trace."""

    name = "session_bloat"
    nudges = False  # judged on a run's first request only: there is no second time
    Config = SessionBloatConfig

    def plan_request(self, seen: RequestSeen, cfg: SessionBloatConfig) -> Plan:
        request = seen.request
        if request.assistant_turns == 0 or request.history_chars <= cfg.max_history_chars // TRACED_FROM:
            return {}
        return {"seen": _SEEN}  # the value before: None for a run never traced

    def check_request(
        self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: SessionBloatConfig
    ) -> Verdict | None:
        request = seen.request
        if facts.request_index != 1 or request.assistant_turns == 0:
            return None
        if request.history_chars <= cfg.max_history_chars or got.get("seen") is not None:
            return None
        return self.verdict(
            f"the run's first request already carries {request.history_chars:,} characters of history "
            f"({request.assistant_turns} earlier assistant turns), over the limit of {cfg.max_history_chars:,}",
            shows=Evidence(value=request.history_chars, limit=cfg.max_history_chars),
            history_chars=request.history_chars,
            assistant_turns=request.assistant_turns,
        )
