"""`stagnation`: the agent keeps taking exactly the same action and getting the same answer.

An action is one assistant turn's tool calls (tool and arguments) together
with the results they got back, so a poll whose answer changes is progress
and never counts. Turns without tool calls are not actions. A poll answered
only that its job is still running (`waiting.still_running`) cannot change
before the job ends: how long and how fast an agent may poll is
`non_progress`'s to judge (`poll_patience`).
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
from runguard.proxy.core.events import is_transfer


class StagnationConfig(DetectorConfig):
    window: int = Field(
        4,
        ge=2,
        le=16,
        description="Consecutive identical actions (the same calls with the same arguments and the same "
        "results) that stop the run. Two in a row is normal noise; four is stuck.",
        json_schema_extra={"tighten": "lower"},
    )


class Stagnation(Detector[StagnationConfig]):
    """Pre-flight: the previous turn's action joins a window; a full window of one action trips."""

    name = "stagnation"
    per_thread = True
    reads_calls = True
    Config = StagnationConfig

    def plan_request(self, seen: RequestSeen, cfg: StagnationConfig) -> Plan:
        return push_action(seen.request, cfg.window)

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: StagnationConfig) -> Verdict | None:
        window = got.get("actions")
        if not isinstance(window, tuple) or len(window) < cfg.window:
            return None
        signatures = {item.partition(":")[0] for item in window}
        if len(signatures) != 1 or next(iter(signatures)).startswith(WAITING):
            return None  # other actions; or a job polled while it runs (`non_progress`'s)
        tools = sorted({call.name for call in seen.request.prior_calls if not is_transfer(call.name)})
        # Every action of the window was this one: the calls with their results, as this request carries them.
        action = shown_results(seen.request, None, tools)
        current = shown_results(seen.request, facts.request_index, tools)
        return self.verdict(
            f"the last {len(window)} actions were identical: the same call to {', '.join(tools)} "
            f"with the same arguments and the same result",
            shows=Evidence(calls=(*action * (len(window) - 1), *current)),
            tools=tools,
            signature=next(iter(signatures)),
            actions=len(window),
        )
