"""`budget`: stop a run (or an API key for the day) once its spend reaches a USD cap.

Spend comes from the guard's own counters (usage times the pricing table), as
of the previous response, so the request that would start past the cap is the
one stopped, before it costs anything.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, RequestSeen, Results, RunFacts, Verdict
from runguard.proxy.core.ops import Scope


class BudgetConfig(DetectorConfig):
    run_usd: float = Field(
        25.0,
        gt=0,
        description="USD a run may spend. Once its spend reaches this, its next request is stopped. The "
        "costliest recorded coding sessions spent $10.59 (Claude Code on Opus 4.5, 100 calls over 96 minutes, "
        "still working), $5.77 (Claude Code watching a Linux build for 4.5 hours) and $3.45 (113 calls on "
        "Sonnet 4.5). At the first one's pace (about $0.11 a call), $25 pays for about 240 requests, under "
        "half of `max_requests`' cap of 500. Unpriced models add nothing to it.",
        json_schema_extra={"tighten": "lower"},
    )
    key_daily_usd: float | None = Field(
        None,
        gt=0,
        description="USD one API key may spend per UTC day across all its runs; off when unset. "
        "Reaching it stops every request of that key until the day ends or the key is reset.",
        json_schema_extra={"tighten": "lower"},
    )


class Budget(Detector[BudgetConfig]):
    """Pre-flight: the run's spend, then the key's spend today, against their caps."""

    name = "budget"
    Config = BudgetConfig

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: BudgetConfig) -> Verdict | None:
        if facts.usd >= cfg.run_usd:
            return self.verdict(
                f"run spent ${facts.usd:.4f}, reaching its ${cfg.run_usd:.2f} budget",
                shows=Evidence(value=round(facts.usd, 6), limit=cfg.run_usd),
                usd=round(facts.usd, 6),
            )
        if cfg.key_daily_usd is not None and facts.key_day_usd >= cfg.key_daily_usd:
            return self.verdict(
                f"API key spent ${facts.key_day_usd:.4f} today, reaching its ${cfg.key_daily_usd:.2f} daily budget",
                Scope.KEY,
                shows=Evidence(value=round(facts.key_day_usd, 6), limit=cfg.key_daily_usd),
                usd=round(facts.key_day_usd, 6),
            )
        return None
