"""`consecutive_same_tool`: the model turns to the same single tool turn after turn.

One turn is one model response with tool calls (a parallel batch is one
turn). Paging through a listing does this too, so it warns by default, once
when a streak reaches the threshold and again each time it doubles (a warning
on every turn of a long streak would bury the one a person should read). A
turn calling a shell (which runs every program) shows no choice of tool:
it is not counted (`commands.chosen_work`).
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support.base import (
    Action,
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    ResponseSeen,
    Results,
    Verdict,
    shown_call,
)
from runguard.detectors.support.commands import chosen_work
from runguard.detectors.support.marks import marks
from runguard.detectors.support.normalize import tag
from runguard.detectors.support.turns import tool_work
from runguard.proxy.core.ops import Push, Scope

REACH = 8  # a streak is followed up to REACH times the threshold (warned at 1, 2, 4 and 8 times it): the
# window keeps one turn more, so a longer streak is seen as past the last mark, not at it again


class ConsecutiveSameToolConfig(DetectorConfig):
    action: Action = Field(
        Action.WARN,
        description="block, warn (record and flag only) or off. Warns by default: paging through a "
        "listing also calls one tool turn after turn.",
    )
    threshold: int = Field(
        3,
        ge=2,
        le=32,
        description="Consecutive model turns with tool calls that all call the same one tool, and only it, "
        "at which the run is flagged. Calls handing work to another agent (transfers, delegations) are "
        "left out.",
        json_schema_extra={"tighten": "lower"},
    )


class ConsecutiveSameTool(Detector[ConsecutiveSameToolConfig]):
    """After each response with tool calls: push the turn's set of tools, flag a full window of one tool."""

    name = "consecutive_same_tool"
    per_thread = True
    needs_tools = True
    Config = ConsecutiveSameToolConfig

    def plan_response(self, seen: ResponseSeen, cfg: ConsecutiveSameToolConfig) -> Plan:
        if not tool_work(seen.response):
            return {}
        names = sorted({call.name for call in chosen_work(seen.response)})
        # A turn mixing tools is pushed too: it breaks the streak. So does a new question from the
        # user: a session calling one tool once per question is not calling it turn after turn, and a
        # turn of a shell's (calls, which say nothing of the agent's choice.
        item = "+" if not names else tag(names[0]) if len(names) == 1 else "+" + tag("\x00".join(names))
        items = ("+", item) if seen.request.new_user_turn else (item,)
        return {"turns": Push(Scope.RUN, "turns", items, keep=cfg.threshold * REACH + 1)}

    def check_response(self, seen: ResponseSeen, got: Results, cfg: ConsecutiveSameToolConfig) -> Verdict | None:
        turns = got.get("turns")
        if not isinstance(turns, tuple) or not turns or turns[-1].startswith("+"):
            return None
        streak = next((i for i, item in enumerate(reversed(turns)) if item != turns[-1]), len(turns))
        if not marks(streak, cfg.threshold):  # under the threshold, or between its marks
            return None
        tool = chosen_work(seen.response)[0].name
        seq = seen.facts.request_index
        latest = tuple(shown_call(c, seq=seq) for c in chosen_work(seen.response))
        return self.verdict(
            f"tool '{tool}' was the only tool called in {streak} consecutive model turns",
            shows=Evidence(calls=latest, value=streak, limit=cfg.threshold),
            tool=tool,
            turns=streak,
        )
