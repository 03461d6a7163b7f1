"""`parallel_calls`: one response asking for too many, or too similar, tool calls at once.

Parallel calls multiply a turn's cost. Three signals, checked on the response
itself so a non-streamed one can be replaced before any of its tools run:
more calls than a cap; two calls in the batch with near-identical arguments
(the same lookup sent to several similar tools); and a batch that repeats the
previous turn's batch call for call.

Two different tools asked about the same thing by name or id (`get_user`,
`get_orders` and `get_tickets` for one user id; weather and local time for
one city) is a fan-out of different lookups, not a spray: across tools, only
calls that ask in words (a query with whitespace) are compared. Nor are look-ups
that differ in what they name though their words are alike: two `dig` probes
on two ports, pings to two hosts, six `kill`s for six pids (`_apart`); nor calls that write other
data, whose texts of three lines or more differ (`sketch.writes_apart`): two edits of one file at its
two places, each with its own old and new text, are two changes, not one sent twice. Nor are calls
that hand work to another agent (a delegation: an orchestrator giving its
Spanish, French and Italian translator agents the same sentence); they count
towards the cap. An Agno task leader's calls that only write its plan
(`create_task`, six tasks at once) do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from pydantic import Field

from runguard.detectors.support.base import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    ResponseSeen,
    ShownCall,
    Verdict,
    shown_call,
)
from runguard.detectors.support.commands import asked_values, command_of
from runguard.detectors.support.normalize import call_tag, squash
from runguard.detectors.support.sketch import (
    Sketch,
    call_asks_in_words,
    call_sketch,
    call_sketch_packed,
    call_targets,
    decode_sketch,
    named_apart,
    sketch_similarity,
    writes_apart,
)
from runguard.detectors.support.turns import tool_work
from runguard.proxy.core.events import ToolCall
from runguard.proxy.core.ops import Get, OpResult, Put, Scope

STORED_CALLS = 8  # calls of a batch remembered for the next turn's comparison

Batch = list[tuple[str, Sketch]]  # (tool tag, argument sketch) per call


class ParallelCallsConfig(DetectorConfig):
    max_calls: int = Field(
        16,
        ge=1,
        description="Tool calls one model response may ask for; more are stopped before the tools run. A "
        "healthy fan-out asks 3-10 agents or lookups at once (one per region, city, ticker, file); past 16 a "
        "response is spraying calls (a broken index, a list read as tasks). A fan-out repeated turn after turn "
        "is `fan_out`'s.",
        json_schema_extra={"tighten": "lower"},
    )
    similarity: float = Field(
        0.80,
        gt=0,
        le=1,
        description="Jaccard similarity of two calls' argument words at which they are the same lookup: "
        "within one batch (across tools; calls handing work to another agent are not compared), or between "
        "this batch and the previous turn's (same tool). "
        "Only the arguments the two calls do not share are compared: five quotes with the same options differ; "
        "calls whose texts of three lines or more differ (two edits of one file at two places) are never alike.",
        json_schema_extra={"tighten": "lower"},
    )


# An Agno `TeamMode.tasks` leader (known by the three tools below, declared together) keeps its plan with
# these tools: six `create_task` calls in one response write a plan of six steps and run nothing. Its
# `execute_task` calls run the tasks, and count.
AGNO_TASK_MODE = frozenset({"create_task", "execute_task", "mark_all_complete"})
AGNO_PLAN_TOOLS = frozenset({"create_task", "update_task_status", "add_task_note", "list_tasks", "mark_all_complete"})


def _shown(seen: ResponseSeen, calls: Sequence[ToolCall]) -> tuple[ShownCall, ...]:
    """A batch's calls as evidence, made by the response to the run's request `seen.facts.request_index`."""
    return tuple(shown_call(call, seq=seen.facts.request_index) for call in calls)


def _running(seen: ResponseSeen) -> Sequence[ToolCall]:
    """The response's calls that run something: all of them, but an Agno task leader's plan keeping."""
    calls = seen.response.tool_calls
    if not AGNO_TASK_MODE.issubset(seen.request.tool_names):
        return calls
    return [call for call in calls if call.name not in AGNO_PLAN_TOOLS]


def _batch(calls: Sequence[ToolCall]) -> Batch:
    return [(call_tag(call), call_sketch(call)) for call in calls]


def _stored(raw: OpResult) -> Batch:
    if not isinstance(raw, str):
        return []
    return [(name, decode_sketch(sketch)) for name, _, sketch in (entry.partition("|") for entry in raw.split(","))]


def _apart(a: ToolCall, b: ToolCall) -> bool:
    """Two calls of one batch that do different things though their words are alike: shell commands that
    differ (`dig @ns -p 53` and `-p 5353`, `kill 4121` and `kill 4188`), or calls naming other codes, hosts
    or ids in their one-word values, or other files, numbers or names in their text."""
    command_a, command_b = command_of(a), command_of(b)
    if command_a is not None and command_b is not None:
        return squash(command_a) != squash(command_b)
    return asked_values(a) != asked_values(b) or named_apart(call_targets(a), call_targets(b))


class ParallelCalls(Detector[ParallelCallsConfig]):
    """Reads the previous batch before the request, judges the response, stores its batch after."""

    name = "parallel_calls"
    per_thread = True
    Config = ParallelCallsConfig

    def plan_request(self, seen: RequestSeen, cfg: ParallelCallsConfig) -> Plan:
        return {"prev": Get(Scope.RUN, "prev")}

    def inspect_response(self, seen: ResponseSeen, cfg: ParallelCallsConfig) -> Verdict | None:
        calls = seen.response.tool_calls
        if len(calls) > cfg.max_calls and len(running := _running(seen)) > cfg.max_calls:
            return self.verdict(
                f"{len(running)} tool calls in one response, over the limit of {cfg.max_calls}",
                shows=Evidence(batch=_shown(seen, running), value=len(running), limit=cfg.max_calls),
                tools=sorted({call.name for call in running}),
            )
        if len(calls) < 2:
            return None
        # One text handed to several agents (each translator the same sentence) is a fan-out, not a spray.
        work = tool_work(seen.response) if seen.response.handoffs else calls
        alike = self._alike(seen, work, cfg)
        return alike or self._repeat(seen, _stored(seen.before.get("prev")), _batch(calls), cfg)

    def _alike(self, seen: ResponseSeen, calls: Sequence[ToolCall], cfg: ParallelCallsConfig) -> Verdict | None:
        """Two calls of the batch that are the same lookup: of one tool, or asking several tools in words."""
        for (i, (tool_a, a)), (j, (tool_b, b)) in combinations(enumerate(_batch(calls)), 2):
            if tool_a != tool_b and not (call_asks_in_words(calls[i]) and call_asks_in_words(calls[j])):
                continue  # one entity looked up by several tools
            if _apart(calls[i], calls[j]) or writes_apart(a, b):
                continue  # other hosts, ports, pids, ids: one look-up each; other code or text written
            similarity = sketch_similarity(a, b)
            if similarity >= cfg.similarity:
                return self.verdict(
                    f"'{calls[i].name}' and '{calls[j].name}' were called in one batch with near-identical "
                    f"arguments (Jaccard {similarity:.2f} >= {cfg.similarity})",
                    shows=Evidence(batch=_shown(seen, (calls[i], calls[j]))),
                    tools=[calls[i].name, calls[j].name],
                    similarity=round(similarity, 3),
                )
        return None

    def _repeat(self, seen: ResponseSeen, prev: Batch, batch: Batch, cfg: ParallelCallsConfig) -> Verdict | None:
        """The batch repeats the previous one: matching pairs reach the size of the smaller batch."""
        if len(prev) < 2:
            return None
        matches = sum(
            1
            for p in prev
            for c in batch
            if p[0] == c[0] and not writes_apart(p[1], c[1]) and sketch_similarity(p[1], c[1]) >= cfg.similarity
        )
        if matches < min(len(prev), len(batch)):
            return None
        return self.verdict(
            f"this batch of {len(batch)} calls repeats the previous turn's batch of {len(prev)} "
            f"({matches} matching pairs)",
            shows=Evidence(batch=_shown(seen, seen.response.tool_calls)),
            width=len(batch),
            previous_width=len(prev),
            matching_pairs=matches,
        )

    def plan_response(self, seen: ResponseSeen, cfg: ParallelCallsConfig) -> Plan:
        calls = seen.response.tool_calls
        if not calls:
            # A turn without calls ends the sequence of batches (nothing to clear if nothing stored).
            return (
                {}
                if seen.upstream_failed or seen.before.get("prev") is None
                else {"prev": Put(Scope.RUN, "prev", None)}
            )
        stored = ",".join(f"{call_tag(call)}|{call_sketch_packed(call)}" for call in calls[:STORED_CALLS])
        return {"prev": Put(Scope.RUN, "prev", stored)}
