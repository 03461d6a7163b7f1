"""`fan_out`: the same parallel batch of agents or tools sent again, reworded, turn after turn.

A coordinator that gets answers it does not accept sends the same set of
sub-agents (agent tools) a reworded task, and again: every round costs the
whole fan-out. One wide fan-out is not a loop (`parallel_calls` caps the width
of one response); the same one, turn after turn, is. A response's batch (at
least `min_width` calls, handoffs to another agent aside) is compared with the
previous turn's: the same set of tools, and each call's arguments near those
of the previous call of its tool (Jaccard of argument words, as `spiral`
reads them, at least `similarity` on average, and none under half of it; a
call by ids and names only, without words, is near only when its arguments
are the same, and a task naming other files, numbers or names is not near).
A batch with one call that does other work is other work: a coding-agent CLI
editing one function after another with its to-do list beside each edit sends
the same list (near) beside a different edit (far) every turn. `turns` such batches in a row
stop the run, on the response itself, before the tools run again.

Defaults. A reworded task keeps its subject's words: "find the cheapest
flights Lisbon to Berlin in May" and "search again for the cheapest Lisbon to
Berlin flights in May" share 0.59 of their words, a new task for the same
agents 0-0.3, so the line is 0.5. Three rounds in a row (the third stopped
before it runs) leave room for one follow-up round, which careful
coordinators send.

False positives. What comes close: a map over chunks in rounds (the same tool
on other chunks: other ids, or texts of several lines, which have no words);
a review round after a draft round (the tasks name other work); a debate whose
rounds hand each agent the others' arguments (new text every round). Each
differs in its arguments from the round before, and only batches of the same
set of tools are compared.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from runguard.detectors.support.base import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    Verdict,
    shown_call,
)
from runguard.detectors.support.normalize import call_args_digest, call_tag
from runguard.detectors.support.sketch import (
    call_asks_in_words,
    call_sketch,
    call_sketch_packed,
    call_targets,
    decode_sketch,
    named_apart,
    sketch_similarity,
)
from runguard.proxy.core.events import ToolCall, digest, is_transfer
from runguard.proxy.core.ops import Get, OpResult, Put, Scope

STORED_CALLS = 8  # calls of a batch remembered for the next turn (the first ones)


class FanOutConfig(DetectorConfig):
    min_width: int = Field(
        2,
        ge=2,
        le=16,
        description="Calls a response must make at once to be a fan-out (one call repeated is `spiral`'s).",
    )
    similarity: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Mean Jaccard similarity of each call's argument words with the previous turn's call of "
        "its tool at which a batch repeats it, no call under half of it: a reworded task keeps 0.5-0.7 of its "
        "words, a new task 0-0.3. A coding-agent CLI's to-do list beside a new edit every turn means 0.5, with "
        "the list at 0: other work.",
        json_schema_extra={"tighten": "lower"},
    )
    turns: int = Field(
        3,
        ge=2,
        le=8,
        description="Batches in a row, each repeating the one before, that stop the run (the last is stopped "
        "before its tools run).",
        json_schema_extra={"tighten": "lower"},
    )


def _calls(calls: Sequence[ToolCall]) -> list[ToolCall]:
    return [call for call in calls if not is_transfer(call.name)]


def _entry(call: ToolCall) -> str:
    """A call as stored: its arguments' words (a sketch) when it asks in words, else its arguments' digest;
    and the files, numbers and names its text names."""
    if not call_asks_in_words(call):
        return f"={call_args_digest(call)}"
    return f"{call_targets(call)}/{call_sketch_packed(call)}"


def _similarity(call: ToolCall, entry: str) -> float:
    """How near a call is to a stored one. A task is asked in words: a lookup by ids and names (another
    chunk, another city) is the same only when its arguments are, and so is a task naming other things
    (another region, file or year)."""
    if entry.startswith("="):
        return 1.0 if not call_asks_in_words(call) and entry[1:] == call_args_digest(call) else 0.0
    named, _, sketch = entry.partition("/")
    if not call_asks_in_words(call) or named_apart(named, call_targets(call)):
        return 0.0
    return sketch_similarity(call_sketch(call), decode_sketch(sketch))


def _tool_set(calls: Sequence[ToolCall]) -> str:
    """A digest of the set of tools a batch calls."""
    return digest(",".join(sorted({call_tag(call) for call in calls})), 4)


def _stored(raw: OpResult) -> tuple[int, str, list[tuple[str, str]]]:
    """(the streak, the tool set's digest, the batch as (tool tag, packed sketch) per call) stored after the
    previous turn; a streak of 0 when nothing (readable) is stored."""
    parts = raw.split("#", 2) if isinstance(raw, str) else []
    if len(parts) != 3 or not parts[0].isdigit():
        return 0, "", []
    calls = [(tool, sketch) for tool, _, sketch in (entry.partition("|") for entry in parts[2].split(",") if entry)]
    return int(parts[0]), parts[1], calls


class FanOut(Detector[FanOutConfig]):
    """Reads the previous batch before the request, judges the response, stores the batch and streak after."""

    name = "fan_out"
    per_thread = True
    Config = FanOutConfig

    def plan_request(self, seen: RequestSeen, cfg: FanOutConfig) -> Plan:
        return {"prev": Get(Scope.RUN, "prev")}

    def _streak(self, seen: ResponseSeen, cfg: FanOutConfig) -> tuple[int, float, int]:
        """(this batch's streak, its similarity with the previous batch, the previous batch's width)."""
        calls = _calls(seen.response.tool_calls)
        if len(calls) < cfg.min_width:
            return 0, 0.0, 0
        streak, tool_set, prev = _stored(seen.before.get("prev"))
        if not prev or tool_set != _tool_set(calls):
            return 1, 0.0, len(prev)  # the first fan-out, or to another set of tools
        similarities = []
        for call in calls:
            best = max((_similarity(call, entry) for tool, entry in prev if tool == call_tag(call)), default=None)
            if best is not None:
                similarities.append(best)
        similarity = sum(similarities) / len(similarities) if similarities else 0.0
        # A call far from its tool's last one (under half the line) is other work: the batch moved on.
        again = similarity >= cfg.similarity and min(similarities) >= cfg.similarity / 2
        return (streak + 1 if again else 1), similarity, len(prev)

    def inspect_response(self, seen: ResponseSeen, cfg: FanOutConfig) -> Verdict | None:
        streak, similarity, width = self._streak(seen, cfg)
        if streak < cfg.turns:
            return None
        calls = _calls(seen.response.tool_calls)
        tools = sorted({call.name for call in calls})
        batch = tuple(shown_call(c, seq=seen.facts.request_index) for c in calls)
        return self.verdict(
            f"the same fan-out to {len(tools)} tools ({', '.join(tools[:4])}{', ...' if len(tools) > 4 else ''}) "
            f"was sent {streak} turns in a row with near-identical arguments "
            f"(similarity {similarity:.2f} >= {cfg.similarity})",
            shows=Evidence(batch=batch),
            tools=tools,
            width=len(calls),
            previous_width=width,
            turns=streak,
            similarity=round(similarity, 3),
        )

    def plan_response(self, seen: ResponseSeen, cfg: FanOutConfig) -> Plan:
        if seen.upstream_failed:
            return {}
        calls = _calls(seen.response.tool_calls)
        if len(calls) < cfg.min_width:
            # A turn that is not a fan-out ends the sequence (nothing to clear if nothing stored).
            return {} if seen.before.get("prev") is None else {"prev": Put(Scope.RUN, "prev", None)}
        streak, _, _ = self._streak(seen, cfg)
        batch = ",".join(f"{call_tag(call)}|{_entry(call)}" for call in calls[:STORED_CALLS])
        return {"prev": Put(Scope.RUN, "prev", f"{streak}#{_tool_set(calls)}#{batch}")}
