"""`oscillation`: the agent toggles between a couple of actions without getting anywhere.

A-B-A-B-A-B: each action alone is not repeated back to back, but the run's
recent actions hold only two distinct ones. Actions are compared with their
results (see `stagnation`), so alternating polls whose answers change pass, and
so does waiting on a job that is still running (a `sleep`, then a check answered
"running": `waiting.still_running`), which is `non_progress`'s to judge.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support.base import (
    WAITING,
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    Results,
    RunFacts,
    Verdict,
    push_action,
    shown_results,
)


class OscillationConfig(DetectorConfig):
    window: int = Field(
        6,
        ge=3,
        le=16,
        description="How many of the run's latest actions (tool calls with their results) are looked at.",
    )
    max_distinct: int = Field(
        2,
        ge=1,
        le=8,
        description="A full window holding this many distinct actions or fewer stops the run.",
    )


class Oscillation(Detector[OscillationConfig]):
    """Pre-flight: the previous turn's action joins a window; a full window with few distinct actions trips."""

    name = "oscillation"
    per_thread = True
    reads_calls = True
    Config = OscillationConfig

    def plan_request(self, seen: RequestSeen, cfg: OscillationConfig) -> Plan:
        return push_action(seen.request, cfg.window)

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: OscillationConfig) -> Verdict | None:
        window = got.get("actions")
        if not isinstance(window, tuple) or len(window) < cfg.window:
            return None
        signatures = sorted({item.partition(":")[0] for item in window})
        if len(signatures) > cfg.max_distinct or any(s.startswith(WAITING) for s in signatures):
            return None  # more actions; or waiting on a job that runs (`non_progress`'s)
        return self.verdict(
            f"the last {len(window)} actions hold only {len(signatures)} distinct ones: "
            f"the agent is going back and forth",
            # The latest action's calls; the window's actions, oldest first, by signature (`sequence`).
            shows=Evidence(calls=shown_results(seen.request, facts.request_index)),
            signatures=signatures,
            sequence=[item.partition(":")[0] for item in window],
            actions=len(window),
        )
