"""`tool_storm`: one tool called very many times in a run.

A confused agent calls the same tool over and over, or every tool every turn,
seeking a resolution it cannot get. Legitimate work (a long listing, a
research plan) also calls one tool often, so this warns by default: when a
tool's count reaches the threshold in a response that calls it, and again each
time the count doubles (not on every later response: a long coding session
reads files and updates its to-do list dozens of times). The calls
of a shell (which runs every program) are not counted (`commands.chosen_work`):
calling it turn after turn is how a coding agent works.
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support import tally
from runguard.detectors.support.base import (
    Action,
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    Results,
    Verdict,
    shown_call,
)
from runguard.detectors.support.commands import chosen_work
from runguard.detectors.support.marks import marks
from runguard.detectors.support.normalize import call_tag
from runguard.proxy.core.ops import Add, Op, Scope

MAX_TOOLS = 64  # distinct tools counted per run; calls of further tools are not counted


class ToolStormConfig(DetectorConfig):
    action: Action = Field(
        Action.WARN,
        description="block, warn (record and flag only) or off. Warns by default: pagination and long "
        "plans call one tool often too.",
    )
    threshold: int = Field(
        8,
        ge=1,
        description=f"Calls of one tool within a run at which it is flagged (the first {MAX_TOOLS} "
        f"distinct tools of a run are counted; calls handing work to another agent are not).",
        json_schema_extra={"tighten": "lower"},
    )


def _called(seen: ResponseSeen) -> dict[str, int]:
    """The response's calls per tool (handing work to another agent is not counted: `handoff_cycle` is)."""
    calls: dict[str, int] = {}
    for call in chosen_work(seen.response):
        tool = call_tag(call)
        calls[tool] = calls.get(tool, 0) + 1
    return calls


class ToolStorm(Detector[ToolStormConfig]):
    """After each response: add its calls to per-tool counters."""

    name = "tool_storm"
    per_thread = True
    needs_tools = True
    Config = ToolStormConfig

    def plan_request(self, seen: RequestSeen, cfg: ToolStormConfig) -> Plan:
        return {"tools": tally.fetch("tools")}

    def plan_response(self, seen: ResponseSeen, cfg: ToolStormConfig) -> Plan:
        calls = _called(seen)
        if not calls:
            return {}
        admitted, new = tally.admit(seen.before.get("tools"), calls, MAX_TOOLS)
        plan: dict[str, Op] = {f"n.{t}": Add(Scope.RUN, f"n.{t}", calls[t]) for t in admitted}
        for op in tally.enrol("tools", new, MAX_TOOLS):
            plan["roster"] = op
        return plan

    def check_response(self, seen: ResponseSeen, got: Results, cfg: ToolStormConfig) -> Verdict | None:
        crossed = {
            tool: int(value)
            for tool, calls in _called(seen).items()
            if isinstance(value := got.get(f"n.{tool}"), float)
            and marks(int(value), cfg.threshold, before=int(value) - calls)
        }
        if not crossed:
            return None
        tool_tag, count = max(crossed.items(), key=lambda item: item[1])
        tool = next((c.name for c in seen.response.tool_calls if call_tag(c) == tool_tag), tool_tag)
        seq = seen.facts.request_index
        latest = tuple(shown_call(c, seq=seq) for c in seen.response.tool_calls if call_tag(c) == tool_tag)
        return self.verdict(
            f"tool '{tool}' was called {int(count)} times in this run (limit {cfg.threshold})",
            shows=Evidence(calls=latest, value=int(count), limit=cfg.threshold),
            tool=tool,
        )
