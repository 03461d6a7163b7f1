"""`context_growth`: the input re-sent every step is growing out of control.

Every agent re-sends its whole conversation each step, so input tokens grow
linearly in any long healthy run: the seeds' signal (recent steps' mean input
at 3x the first steps') alone would stop a plain 12-step plan. This trips only
when that ratio holds and the growth is runaway: each step adding more than
the steps before it (accelerating, e.g. tool output that doubles each round)
or every step adding a bulky amount (large output re-sent each turn).

What the recent steps add is their typical step: the mean of their increments
leaving out the largest one. One big output (an agent printing a whole file it
just patched, after reading it in chunks) is one step, not a trend; growth
that keeps accelerating shows in every step. A real coding agent reading a
2,500-line file 440 lines a step, then printing it whole once, goes from 1,700
to 52,000 input tokens in 7 steps with steps of 770-6,100 tokens and one of
32,000: not stopped.
"""

from __future__ import annotations

from itertools import pairwise
from statistics import fmean

from pydantic import Field

from runguard.detectors.support.base import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    Point,
    ResponseSeen,
    Results,
    Verdict,
)
from runguard.proxy.core.ops import Push, Scope

SIZE = 5  # requests in the "first" and the "recent" windows


class ContextGrowthConfig(DetectorConfig):
    ratio: float = Field(
        3.0,
        gt=1,
        description=f"Mean input tokens of the run's last {SIZE} responses over the mean of its first {SIZE} "
        "at which growth is looked at; growth only trips when it is also accelerating or bulky.",
        json_schema_extra={"tighten": "lower"},
    )
    acceleration: float = Field(
        2.0,
        gt=1,
        description=f"Accelerating: each of the last {SIZE - 1} steps added more tokens than the one before, "
        f"and on average (their largest step left out) at least this many times what each of the first {SIZE - 1} "
        "steps added.",
        json_schema_extra={"tighten": "lower"},
    )
    increment_floor_tokens: int = Field(
        2000,
        ge=0,
        description="What the first steps added per step is taken as at least this many tokens, so a run "
        "whose first steps added almost nothing (planning) does not look accelerating once its steps "
        "do ordinary work.",
    )
    bulky_increment_tokens: int = Field(
        20_000,
        ge=1,
        description=f"Bulky: tokens added per step over the last {SIZE - 1} steps (their largest left out) at least "
        "this many.",
        json_schema_extra={"tighten": "lower"},
    )


def _counts(window: object) -> list[float]:
    if not isinstance(window, tuple):
        return []
    try:
        return [float(item) for item in window]
    except ValueError:
        return []


def _per_step(window: list[float]) -> float:
    return (window[-1] - window[0]) / (len(window) - 1)


def _typical_step(window: list[float]) -> float:
    """What a step of `window` adds, its largest step left out: one big output is not a trend."""
    steps = sorted(b - a for a, b in pairwise(window))
    kept = steps[:-1] if len(steps) > 2 else steps
    return fmean(kept)


def _speeding_up(window: list[float]) -> bool:
    """Every step added more than the step before it."""
    steps = [b - a for a, b in pairwise(window)]
    return all(b > a for a, b in pairwise(steps))


class ContextGrowth(Detector[ContextGrowthConfig]):
    """After each response with usage: its input tokens join a "first" (kept once full) and a "recent" window."""

    name = "context_growth"
    per_thread = True
    Config = ContextGrowthConfig

    def plan_response(self, seen: ResponseSeen, cfg: ContextGrowthConfig) -> Plan:
        usage = seen.response.usage
        if usage is None or usage.input_tokens <= 0:
            return {}
        item = (str(usage.input_tokens),)
        return {
            "first": Push(Scope.RUN, "first", item, keep=SIZE, head=True),
            "recent": Push(Scope.RUN, "recent", item, keep=SIZE),
        }

    def check_response(self, seen: ResponseSeen, got: Results, cfg: ContextGrowthConfig) -> Verdict | None:
        first, recent = _counts(got.get("first")), _counts(got.get("recent"))
        if len(first) < SIZE or len(recent) < SIZE or fmean(first) <= 0:
            return None
        ratio = fmean(recent) / fmean(first)
        if ratio < cfg.ratio:
            return None
        early, late = _per_step(first), _typical_step(recent)
        baseline = max(early, float(cfg.increment_floor_tokens), 1.0)
        if late >= cfg.bulky_increment_tokens:
            how = f"each step adds about {late:,.0f} tokens (bulky at {cfg.bulky_increment_tokens:,})"
        elif late >= cfg.acceleration * baseline and _speeding_up(recent):
            how = (
                f"each step now adds {late:,.0f} tokens, {late / baseline:.1f}x the {baseline:,.0f} of the first steps"
            )
        else:
            return None
        # The curve: the first steps at x 1..5, the latest at the run's request indices.
        now = seen.facts.request_index
        series = [Point(x, y) for x, y in enumerate(first, start=1)]
        series += [
            Point(now - len(recent) + 1 + k, y) for k, y in enumerate(recent) if now - len(recent) + 1 + k > SIZE
        ]
        return self.verdict(
            f"input tokens of the last {SIZE} requests average {ratio:.1f}x the first {SIZE} and {how}",
            shows=Evidence(series=tuple(series), value=round(ratio, 3), limit=cfg.ratio),
            ratio=round(ratio, 3),
            first=[int(v) for v in first],
            recent=[int(v) for v in recent],
            early_increment=round(early, 1),
            late_increment=round(late, 1),
        )
