"""`non_progress`: the same tool returning the same result N times in a row.

A tool stuck in a soft failure (a "partial_parse_error" status, an empty
result set, "retry later") answers the same whatever the model asks; the model
keeps rephrasing and calling. Results are compared by a normalized hash with
volatile keys (ids, timestamps) dropped, over the run's whole sequence of tool
results, so a tool whose answer changes every time never counts. Nor does a
result that only acknowledges that the call was done (`turns.acknowledges`:
"ok", "File written successfully."): a tool that writes three files answers the
same three times, and each time it did what it was asked. Nor does the output of a command that printed
nothing (`commands.trivial_output`: `cat > f <<EOF`, `cp`, `sed -i`, `git apply`, a `grep` that found
nothing): three of those in a row are three steps done, not a loop. They are left out of the sequence:
a test failing the same way three times, with a line flipped between runs by edits that print nothing,
is the same result three times in a row (a fix-test loop, stopped at its 6th request). An empty answer
(`[]`, `{"results": []}`) to calls that ask about other codes, ids or dates (flights on other routes,
other orders) is a new answer each time; to a query only reworded, it is the same. Text the client adds to every result
and changes each time ("N tokens left", a chunk id, a timestamp) is not compared (`normalize.strip_volatile`).

A coordinator asks its sub-agents in turn (agents exposed as tools: openai-agents' `Agent.as_tool`, ADK's
`AgentTool`), so another sub-agent's answer always comes between two of one sub-agent's: an agent tool's
results are counted in a row among its own, while it is asked the same thing (`asking.asked_alike`: in
other words, or again). One asked again and again in new words, answering the same, is stopped at its
third identical answer, as a single tool is, whichever other agents were asked in between; one handed
new tasks is not, whatever it answers. An Agno leader asks all its members through one tool
(`delegate_task_to_member(member_id, task)`): each member's answers are counted among its own the same way
(`asking.asked_agent`), never pooled with the other members'.

A poll of a job that is still running (`waiting.still_running`: `<status>running</status>`, `{"status":
"pending"}`) is the agent waiting, not a tool failing: its answer cannot change before the job ends. A
streak of such answers stops the run only when the agent polls without waiting: `poll_patience` checks in
a row within `poll_seconds` (a check every few seconds, the job unchanged). An agent that lets time pass
between its checks (a `sleep`, a check that blocks) waits as long as its job runs; the run's caps
(`timeout`, `max_requests`, `budget`) bound that.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from pydantic import Field

from runguard.detectors.support import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    Results,
    RunFacts,
    ShownCall,
    Verdict,
)
from runguard.detectors.support.asking import asked_agent, asked_alike, asked_entry, member_of
from runguard.detectors.support.commands import asked_values, empty_answer, is_command_tool, trivial_output
from runguard.detectors.support.normalize import DEFAULT_VOLATILE_KEYS, call_args_digest, lowered, result_digest_of, tag
from runguard.detectors.support.turns import acknowledges, paired_results, result_uniq
from runguard.detectors.support.waiting import still_running
from runguard.proxy.core.events import RequestInfo, ToolCall, ToolResult, is_transfer
from runguard.proxy.core.ops import Push, Scope

SLACK = 16  # extra window room: a re-sent batch must still find its items to be skipped
DELEGATED = "@"  # marks the results of a tool that runs another agent
ASKED = "~"  # in such a result's key, before what the agent was asked (`asking.asked_entry`)
AT = "@"  # after a still-running answer's uniq, the second its request came (`waiting.still_running`)


class NonProgressConfig(DetectorConfig):
    threshold: int = Field(
        3,
        ge=2,
        le=32,
        description="Identical results in a row from the same tool (across the run's tool results, "
        "a parallel batch's identical answers counting once; an agent tool's or an Agno team member's among its "
        "own answers, while it is asked the same thing) that stop the run. A job's answers that it is still running "
        "are waiting, judged by `poll_patience` instead.",
        json_schema_extra={"tighten": "lower"},
    )
    volatile_keys: list[str] = Field(
        default_factory=lambda: list(DEFAULT_VOLATILE_KEYS),
        description="JSON keys ignored (at any depth, any letter case) when comparing tool results: "
        "values that change on every call without changing the answer.",
    )
    acknowledgements_progress: bool = Field(
        True,
        description='A short result that only says the call was done ("ok", "File written successfully.", '
        '{"status": "sent"}: a word of success, none of failure or delay) is progress: it breaks a streak and '
        "never counts in one. Off: it counts like any other result.",
    )
    volatile_keys_by_tool: dict[str, list[str]] = Field(
        default_factory=dict,
        description="More keys to ignore for particular tools, e.g. {parse_document: [attempt, latency_ms]}.",
    )
    poll_patience: int = Field(
        10,
        ge=2,
        le=64,
        description="Answers in a row that only say a job is still running (`<status>running</status>`, "
        '{"status": "pending"}) that stop the run when they came within `poll_seconds`: polling without '
        "waiting. Such a streak is the agent waiting for its job, not a repeated failure, and is never "
        "stopped at `threshold`. Real sessions check a slow search 3 to 5 times in 12 s before killing it, or "
        "wait on a long job with 30-180 s sleeps between checks (8 checks in 11 minutes); stuck ones check "
        "190-280 times, 2-8 s apart, for 12-20 minutes.",
        json_schema_extra={"tighten": "lower"},
    )
    poll_seconds: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="Seconds within which `poll_patience` still-running answers in a row stop the run (a "
        "check every 12 s or faster at the defaults; a busy loop checks every 2-8 s). An agent that waits "
        "longer between its checks is waiting as long as its job runs.",
        json_schema_extra={"tighten": "higher"},
    )

    @cached_property
    def volatile(self) -> frozenset[str]:
        """`volatile_keys` as matched (lowercase), built once per config."""
        return lowered(self.volatile_keys)


def _says_done(request: RequestInfo, result: ToolResult) -> bool:
    """An acknowledgement, or a command's output that printed nothing (of the call the result answers)."""
    if acknowledges(result):
        return True
    if not trivial_output(result):
        return False
    return any(r is result and is_command_tool(call) for call, r in paired_results(request))


class NonProgress(Detector[NonProgressConfig]):
    """Pre-flight, from the tool results the request sends back."""

    name = "non_progress"
    per_thread = True
    Config = NonProgressConfig
    reads_results = True

    def _items(self, request: RequestInfo, cfg: NonProgressConfig, now: float) -> list[str]:
        """One "<tool>:<result hash>:<uniq>" per distinct (tool, result) of this request, in order; a
        still-running answer's with "@<the second it came>"."""
        common = cfg.volatile
        keys: dict[str, str] = {}
        calls = {i: call for i, (call, _) in enumerate(paired_results(request)) if call is not None}
        for position, result in enumerate(request.new_results):
            if result.name is None or is_transfer(result.name):
                continue  # not attributable to a tool, or a handoff's acknowledgement (`handoff_cycle`'s)
            call = calls.get(position)
            if cfg.acknowledgements_progress and is_command_tool(call) and trivial_output(result):
                continue  # a step that printed nothing says nothing: it neither makes a streak nor breaks one
            extra = cfg.volatile_keys_by_tool.get(result.name)
            volatile = common | lowered(extra) if extra else common
            agent = asked_agent(call, request.agent_tools) if call is not None else None
            key = f"{tag(agent or result.name)}:{result_digest_of(result, volatile)}"
            if call is not None and empty_answer(result):
                key += f".{asked_values(call)}"  # nothing found for another code, id or date: another question
            if call is not None and agent is not None:
                # An agent's answers (an agent tool's, an Agno member's) are counted among its own, with what it
                # was asked (`DELEGATED`).
                key = f"{DELEGATED}{key}{ASKED}{asked_entry(call)}"
            uniq = result_uniq(request, result, position)
            keys.setdefault(key, f"{uniq}{AT}{now:.0f}" if still_running(result) else uniq)
        return [f"{key}:{uniq}" for key, uniq in keys.items()]

    def plan_request(self, seen: RequestSeen, cfg: NonProgressConfig) -> Plan:
        items = self._items(seen.request, cfg, seen.now)
        if not items:
            return {}
        keep = max(cfg.threshold, cfg.poll_patience) + SLACK
        return {"seq": Push(Scope.RUN, "seq", tuple(items), keep=keep, unique=True)}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: NonProgressConfig) -> Verdict | None:
        window = got.get("seq")
        if not isinstance(window, tuple) or len(window) < cfg.threshold:
            return None  # too few results for a streak (a run's first requests): nothing to look up
        request = seen.request
        mine = {result_uniq(request, r, i): r for i, r in enumerate(request.new_results)}
        keys, uniqs, times = _entries(window)
        for end in range(len(keys) - 1, -1, -1):
            result = mine.get(uniqs[end])
            if result is None:
                continue
            run = _streak(keys, end)
            # The same acknowledgement each time (judged only here, where it would trip: a result of the
            # same key says the same) is a tool doing what it was asked, each time.
            if run < cfg.threshold or (cfg.acknowledgements_progress and _says_done(request, result)):
                continue
            if times[end] is None or keys[end].startswith(DELEGATED):
                return self._verdict(request, keys[end].partition(ASKED)[0], run, facts.request_index)
            # A job still running, polled: waiting, unless the checks came faster than it could change.
            span = _busy(times, end, run, cfg)
            if span is not None:
                return self._verdict(request, keys[end], run, facts.request_index, span)
        return None

    def _verdict(self, request: RequestInfo, key: str, run: int, seq: int, span: float | None = None) -> Verdict:
        tool_tag, _, result_hash = key.removeprefix(DELEGATED).partition(":")
        result_hash = result_hash.partition(".")[0]  # without what an empty answer's call asked
        tools = request.agent_tools
        named = ((c, r.name) for c, r in paired_results(request) if r.name)
        call, tool = next(((c, name) for c, name in named if tag(_keyed(c, name, tools)) == tool_tag), (None, tool_tag))
        member = member_of(call) if call is not None else None
        # The streak's earlier results are known by their digest only (the state keeps no more).
        earlier = [ShownCall(tool, result_digest=result_hash) for _ in range(run - 1)]
        last = ShownCall(tool, call_args_digest(call) if call else None, result_hash, seq)
        among = " (among its own answers: an agent asked in turn with others)" if key.startswith(DELEGATED) else ""
        whose = f" (member '{member}')" if member else ""
        found: dict[str, Any] = {"member": member} if member else {}
        said = f"returned the same result {run} times in a row{among}"
        if span is not None:
            said = f"answered that its job is still running {run} times in a row, checked again within seconds"
            found["poll_seconds"] = round(span, 1)
        return self.verdict(
            f"tool '{tool}'{whose} {said}",
            shows=Evidence(calls=(*earlier, last)),
            tool=tool,
            result_hash=result_hash,
            repeats=run,
            **found,
        )


def _keyed(call: ToolCall | None, tool: str, agent_tools: frozenset[str]) -> str:
    """The name a result is counted under: the agent its call asked (`asking.asked_agent`), else its tool."""
    agent = asked_agent(call, agent_tools) if call is not None else None
    return agent or tool


def _entries(window: tuple[str, ...]) -> tuple[list[str], list[str], list[float | None]]:
    """The window's results as their keys, uniqs and times (a still-running answer's, else None), each result
    once: a re-sent request's still-running answer comes again with another time."""
    keys: list[str] = []
    uniqs: list[str] = []
    times: list[float | None] = []
    met: set[str] = set()
    for item in window:
        key, _, marked = item.rpartition(":")
        uniq, at, second = marked.partition(AT)
        if uniq in met:
            continue
        met.add(uniq)
        keys.append(key)
        uniqs.append(uniq)
        times.append(float(second) if at and second.isdigit() else None)
    return keys, uniqs, times


def _busy(times: list[float | None], end: int, run: int, cfg: NonProgressConfig) -> float | None:
    """The seconds the last `poll_patience` still-running answers of a streak of `run` ending at `end` took,
    when they came within `poll_seconds` (polling without waiting); else None."""
    if run < cfg.poll_patience:
        return None
    first, last = times[end - cfg.poll_patience + 1], times[end]
    if first is None or last is None or last - first >= cfg.poll_seconds:
        return None
    return last - first


def _streak(keys: list[str], end: int) -> int:
    """How many results in a row, ending at `end`, are the same as it: in the run's sequence, or for an agent
    tool's (`DELEGATED`), among its own answers while it was asked the same thing."""
    key = keys[end]
    if not key.startswith(DELEGATED):
        run = 1
        while end - run >= 0 and keys[end - run] == key:
            run += 1
        return run
    answer, _, asked = key.partition(ASKED)
    tool = answer.partition(":")[0]
    run = 1
    for earlier in reversed(keys[:end]):
        if earlier.partition(":")[0] != tool:
            continue  # another tool's answer: the agents a coordinator asks in turn
        earlier_answer, _, earlier_asked = earlier.partition(ASKED)
        if earlier_answer != answer or not asked_alike(earlier_asked, asked):
            break
        run, asked = run + 1, earlier_asked
    return run
