"""`repeat_call`: the same call, with the same arguments, getting the same answer, again and again.

An agent retrying a call that keeps failing the same way (a 403 page, a
"not found") learns nothing new from each retry. Polling is not a repeat: its
result changes, so the (tool, arguments, result) triple changes too; nor is the
wait between two polls (`wait(seconds=10)`: `turns.is_wait`); nor a poll of a job
whose answer only says it is still running (`waiting.still_running`): it cannot
change before the job ends, and how long an agent may wait, and how fast it may
ask, is `non_progress`'s to judge (`poll_patience`).

Nor is checking again after doing something new: an agent that edits its code
and rebuilds gets the same "built" every time, and a developer's new message
changes what the next identical command means. Repeats are counted since the
last change the window had not seen before (an edit, a write or a command that
does more than read, `changes`, with new arguments or a new answer) or the last
new user message sent beside tool results. Reading between two retries changes nothing: a 403 page
fetched again after each new search still counts. A fix-test loop flipping one
line back and forth repeats its edits, so it is still counted (and
`non_progress` stops it first).
"""

from __future__ import annotations

from pydantic import Field

from runguard.detectors.support.base import (
    Detector,
    DetectorConfig,
    Evidence,
    Plan,
    RequestSeen,
    Results,
    RunFacts,
    Verdict,
    shown_call,
)
from runguard.detectors.support.changes import changes
from runguard.detectors.support.normalize import call_args_digest, result_digest_of
from runguard.detectors.support.turns import is_wait, paired_results, result_uniq
from runguard.detectors.support.waiting import still_running
from runguard.proxy.core.events import RequestInfo, ToolCall, ToolResult, digest, is_transfer
from runguard.proxy.core.ops import Push, Scope

WINDOW = 64  # the last calls remembered; repeats further apart are not counted
NEW_TURN = "+"  # the window's mark of a new user message
CHANGE = "!"  # the mark of a call that changes something, before its triple


class RepeatCallConfig(DetectorConfig):
    threshold: int = Field(
        4,
        ge=2,
        le=WINDOW,
        description=f"Times the same tool, called with identical arguments, may return the identical "
        f"result (volatile keys such as ids and timestamps ignored) with nothing new done between before the "
        f"run is stopped; counted over the run's last {WINDOW} tool calls. A real Claude Code session rebuilt "
        f"its plugin after each of a dozen new edits, the build printing the same lines each time.",
        json_schema_extra={"tighten": "lower"},
    )


def _triple(call: ToolCall, result: ToolResult) -> str:
    # 10 hex characters: 64 of them never collide in practice, and the window stays near 1 KB.
    return digest("\x00".join((call.name, call_args_digest(call), result_digest_of(result))), 5)


def _counted(request: RequestInfo) -> list[tuple[int, ToolCall, ToolResult]]:
    """(position, call, result) for each new result whose call is known and is no transfer to another
    agent (`is_transfer`: handed over again and again on purpose, acknowledged alike every time), nor a
    poll answered that its job is still running (`non_progress` judges polling)."""
    return [
        (position, call, result)
        for position, (call, result) in enumerate(paired_results(request))
        if call is not None and not is_transfer(call.name) and not still_running(result)
    ]


def _items(request: RequestInfo) -> tuple[str, ...]:
    """ "<triple hash>:<uniq>" for each counted result ("!<triple hash>" for a call that changes something),
    after a "+:<place>" mark when the user spoke anew."""
    items = tuple(
        f"{CHANGE if changes(call) else ''}{_triple(call, result)}:{result_uniq(request, result, position)}"
        for position, call, result in _counted(request)
    )
    # Marked only beside results: a request of results alone is what this detector reads (`reads_results`).
    return (f"{NEW_TURN}:{request.message_count}", *items) if items and request.new_user_turn else items


def repeats(window: tuple[str, ...]) -> dict[str, int]:
    """Per triple, its occurrences since the last change new to the window (a changing call's first
    occurrence) or the last new user message: what the agent did again with nothing changed between."""
    counts: dict[str, int] = {}
    seen: set[str] = set()
    for item in window:
        marked = item.partition(":")[0]
        if marked == NEW_TURN:
            counts.clear()
            continue
        triple = marked.removeprefix(CHANGE)
        if triple not in seen:
            seen.add(triple)
            if marked.startswith(CHANGE):
                counts.clear()
        counts[triple] = counts.get(triple, 0) + 1
    return counts


class RepeatCall(Detector[RepeatCallConfig]):
    """Pre-flight, from the calls the previous response made and the results sent back for them."""

    name = "repeat_call"
    per_thread = True
    Config = RepeatCallConfig
    reads_results = True

    def plan_request(self, seen: RequestSeen, cfg: RepeatCallConfig) -> Plan:
        items = _items(seen.request)
        if not items:
            return {}
        return {"calls": Push(Scope.RUN, "calls", items, keep=WINDOW, unique=True)}

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: RepeatCallConfig) -> Verdict | None:
        window = got.get("calls")
        if not isinstance(window, tuple):
            return None
        counts = repeats(window)
        if max(counts.values(), default=0) < cfg.threshold:
            return None  # nothing repeated enough: this request's calls need not be looked up
        # This request's items are known by their uniq part: no need to hash the results again.
        mine = {
            result_uniq(seen.request, result, position): (call, result)
            for position, call, result in _counted(seen.request)
        }
        for item in window:
            marked, _, uniq = item.partition(":")
            triple = marked.removeprefix(CHANGE)
            call, result = mine.get(uniq, (None, None))
            # A wait between polls is the same call and answer every round (judged only where it would trip).
            if call is not None and counts.get(triple, 0) >= cfg.threshold and not is_wait(call):
                # Each repeat was this very call and answer: the earlier ones' requests are not kept.
                same = shown_call(call, result)
                calls = (*[same] * (counts[triple] - 1), shown_call(call, result, facts.request_index))
                return self.verdict(
                    f"tool '{call.name}' was called {counts[triple]} times with identical arguments "
                    f"and returned the same result each time",
                    shows=Evidence(calls=calls),
                    tool=call.name,
                    triple_hash=triple,
                    repeats=counts[triple],
                )
        return None
