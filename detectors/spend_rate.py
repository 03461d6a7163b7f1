"""`spend_rate`: a run (or an API key) spending too fast: USD per minute over a sliding window.

`budget` stops a run once its spend reaches the cap, judged as of the responses
already back: a fan-out of parallel requests is all admitted before any of them
is counted, and each round passes the cap further. This judges the pace
instead. Each response's cost is kept with its second (the last 64 responses
per run, and per key when `key_usd_per_minute` is set); after each response the
spend of the last `window_seconds` is scaled to a minute and compared with the
limit, and a run over it is stopped from its next request. When the 64 kept
responses all fall inside the window (more than 64 responses a minute), their
spend is scaled by the time they span: the pace of the burst.

Defaults. One step of a gpt-4o agent with 50k tokens of context costs about
$0.13 ($2.50/M in, $10/M out, 1k out); a sequential agent makes 6-12 steps a
minute at that size, $0.8-1.6 a minute, and a long-context agent near 128k
tokens (most of it cached at half price) $1.4-2.4. A fan-out of ten such agents
spends $8-16 a minute: it would reach the default $25 run budget in two or three
minutes, with every round in flight. $2.50 a minute stops it within its first
minute, whatever the model; the costliest recorded coding session (Claude Code
on Opus 4.5) averaged $0.11 a minute. gpt-4o-mini, gpt-4.1-mini, gpt-5-mini and Gemini Flash cost 10-40
times less and stay far under it. The key limit is off by default: a key's
healthy pace depends on how many users it serves (set it from its usual peak).
A stop here opens the breaker with its cooldown (the pace falls while it waits).

False positives. What comes close: a long-context agent on a premium model
(o1 at $15/M in, o3-pro at $20/M: one step with 50k tokens is $0.75-1.0, so
three steps a minute reach the limit; raise `run_usd_per_minute` per model
under `guard.overrides` for them); a burst of parallel sub-agents that ends
within seconds (scaled to a minute only when more than 64 responses fell in the
window).
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import Detector, DetectorConfig, Evidence, Plan, ResponseSeen, Results, Verdict
from runguard.proxy.core.ops import Op, Push, Scope

KEEP = 64  # responses kept per run (and key): bounds state at about 1 KB
MICRO = 1_000_000  # costs are kept in micro-USD
MIN_SPAN = 5.0  # seconds: a burst is never scaled up by more than a minute over five seconds


class SpendRateConfig(DetectorConfig):
    run_usd_per_minute: float = Field(
        2.5,
        gt=0,
        description="USD a run may spend per minute (over the last `window_seconds`, scaled to a minute): a "
        "fan-out of ten long-context gpt-4o agents spends $8-16; the costliest recorded coding session "
        "averaged $0.11.",
        json_schema_extra={"tighten": "lower"},
    )
    key_usd_per_minute: float | None = Field(
        None,
        gt=0,
        description="USD one API key may spend per minute across all its runs; off when unset. Over it, every "
        "request of the key is stopped until the breaker's cooldown ends.",
        json_schema_extra={"tighten": "lower"},
    )
    window_seconds: int = Field(
        60,
        ge=10,
        le=600,
        description="Seconds of spend judged; the spend in them is scaled to a minute.",
    )


def per_minute(window: tuple[str, ...], now: float, seconds: int) -> tuple[float, float, int]:
    """(USD per minute, USD in the window, responses in the window) from "<second>:<micro-USD>" items."""
    start = int(now) - seconds
    micros, count, oldest = 0, 0, None
    for item in window:
        second, _, usd = item.partition(":")
        try:
            at, cost = int(second), int(usd)
        except ValueError:
            continue
        if at > start:
            micros += cost
            count += 1
            oldest = at if oldest is None else min(oldest, at)
    spent = micros / MICRO
    if oldest is None:
        return 0.0, 0.0, 0
    span = float(seconds)
    if len(window) >= KEEP and count == len(window):
        span = max(now - oldest, MIN_SPAN)  # the window holds only the last KEEP responses: their own pace
    return spent * 60.0 / span, spent, count


class SpendRate(Detector[SpendRateConfig]):
    """After each response that cost something: keep its cost with its second, then judge the last minute."""

    name = "spend_rate"
    Config = SpendRateConfig

    def plan_response(self, seen: ResponseSeen, cfg: SpendRateConfig) -> Plan:
        if seen.usd <= 0:
            return {}
        item = (f"{int(seen.now)}:{round(seen.usd * MICRO)}",)
        plan: dict[str, Op] = {"run": Push(Scope.RUN, "spend", item, keep=KEEP)}
        if cfg.key_usd_per_minute is not None:
            plan["key"] = Push(Scope.KEY, "spend", item, keep=KEEP)
        return plan

    def check_response(self, seen: ResponseSeen, got: Results, cfg: SpendRateConfig) -> Verdict | None:
        run = got.get("run")
        if isinstance(run, tuple):
            rate, spent, count = per_minute(run, seen.now, cfg.window_seconds)
            if rate >= cfg.run_usd_per_minute:
                return self.verdict(
                    f"run is spending ${rate:.2f} a minute (${spent:.4f} in {count} responses over the last "
                    f"{cfg.window_seconds} s), over the limit of ${cfg.run_usd_per_minute:.2f} a minute",
                    shows=Evidence(value=round(rate, 4), limit=cfg.run_usd_per_minute),
                    usd_in_window=round(spent, 6),
                    responses=count,
                    window_seconds=cfg.window_seconds,
                )
        key = got.get("key")
        if isinstance(key, tuple) and cfg.key_usd_per_minute is not None:
            rate, spent, count = per_minute(key, seen.now, cfg.window_seconds)
            if rate >= cfg.key_usd_per_minute:
                return self.verdict(
                    f"API key is spending ${rate:.2f} a minute (${spent:.4f} in {count} responses over the last "
                    f"{cfg.window_seconds} s), over the limit of ${cfg.key_usd_per_minute:.2f} a minute",
                    Scope.KEY,
                    shows=Evidence(value=round(rate, 4), limit=cfg.key_usd_per_minute),
                    usd_in_window=round(spent, 6),
                    responses=count,
                    window_seconds=cfg.window_seconds,
                )
        return None
