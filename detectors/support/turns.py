"""Tool calls paired with their results, and what a turn of an agent did.

- `paired_results` / `turn_signature`: the last assistant turn's calls with
  the results the request sends back for them (by call id, else by name in
  order: Gemini's results carry no id), and that turn as one hashed action.
- `acknowledges` / `is_wait` / `tool_work`: a result that only says the call was
  done, a call that only lets time pass, and a response's calls less those
  handing work to another agent.
"""

from __future__ import annotations

import re

from runguard.detectors.support.normalize import (
    call_args_digest,
    canonical_json,
    remember,
    result_digest_of,
    tag,
)
from runguard.proxy.core.events import HandoffKind, RequestInfo, ResponseInfo, ToolCall, ToolResult, digest, is_transfer

ACK_CHARS = 200  # a longer result says more than that it was done
_DONE = re.compile(
    r"\b(?:ok|okay|success|successful|successfully|succeeded|done|true|saved|written|wrote|sent|created"
    r"|updated|deleted|removed|applied|completed|stored|uploaded|edited|modified|changed|replaced|inserted"
    r"|added|appended|moved|renamed|copied|patched|posted|published|scheduled|booked|cancelled|canceled"
    r"|archived|marked|assigned|closed|merged|committed|pushed|deployed|installed|recorded|logged|noted"
    r"|confirmed|accepted|approved|enabled|disabled|set)\b"
)
_NOT_DONE = re.compile(
    r"error|fail|invalid|denied|not found|unable|cannot|can't|could not|couldn't|timeout|timed out|retry|try again"
    r"|unavailable|partial|exception|refused|forbidden|unauthori|missing|empty|no results|not allowed|rejected"
    r"|conflict|too many|rate limit|null|none|false|pending|queued|later|\bnot\b|\bno\b|nothing|unchanged"
    r"|skipped|ignored|already"
)


def _call_positions(request: RequestInfo) -> list[int | None]:
    """For each new result, the position of the prior call it answers: by call id, else the next of that name.

    Computed once per request (several detectors pair results with calls).
    """
    found: list[int | None] | None = request.derived.get("positions")
    return found if found is not None else remember(request.derived, "positions", _positions(request))


def _positions(request: RequestInfo) -> list[int | None]:
    calls = request.prior_calls
    free = set(range(len(calls)))
    by_id = {call.call_id: i for i, call in enumerate(calls) if call.call_id}
    positions: list[int | None] = []
    for result in request.new_results:
        found = by_id.get(result.call_id) if result.call_id else None
        if found is None or found not in free:
            found = next((i for i in sorted(free) if calls[i].name == result.name), None)
        if found is not None:
            free.discard(found)
        positions.append(found)
    return positions


Pairs = tuple[tuple[ToolCall | None, ToolResult], ...]


def paired_results(request: RequestInfo) -> Pairs:
    """Each new tool result with the prior call it answers (None when no call matches).

    Paired once per request: five detectors and the records read the pairs of the same request.
    """
    found: Pairs | None = request.derived.get("pairs")
    return found if found is not None else remember(request.derived, "pairs", _pairs(request))


def _pairs(request: RequestInfo) -> Pairs:
    calls = request.prior_calls
    return tuple(
        (None if i is None else calls[i], result)
        for i, result in zip(_call_positions(request), request.new_results, strict=True)
    )


def result_uniq(request: RequestInfo, result: ToolResult, position: int) -> str:
    """Identifies one tool result across re-sends: its call id, or (Gemini) where it sits in the conversation.

    `position` is the result's place in `request.new_results`; each one's is computed once per request
    (several detectors name the same results).
    """
    found: list[str] | None = request.derived.get("uniqs")
    if found is None:
        count = request.message_count
        found = remember(
            request.derived, "uniqs", [tag(r.call_id or f"{count}.{i}") for i, r in enumerate(request.new_results)]
        )
    if position < len(found) and request.new_results[position] is result:
        return found[position]
    return tag(result.call_id or f"{request.message_count}.{position}")


_UNSIGNED: tuple[str, str] = ("", "")  # `turn_signature` not computed yet for the request (None is an answer)
_WAITS = ("wait", "sleep", "pause", "delay")


def is_wait(call: ToolCall) -> bool:
    """A call that only lets time pass (`wait(seconds=10)`, `sleep(ms=500)`): a poll makes the same one, with
    the same answer, each round; what the poll finds is what tells progress."""
    if not call.name.lower().startswith(_WAITS):
        return False
    value = canonical_json(call)
    return isinstance(value, dict) and all(type(item) in (int, float) for item in value.values())


def acknowledges(result: ToolResult) -> bool:
    """Whether a tool result only says that what was asked was done ("ok", "File written successfully.",
    `{"status": "sent"}`): a short text with a word of success and none of failure or delay. A tool that
    writes, sends or saves answers so every time it works: the same answer is progress there."""
    content = result.content
    if len(content) > ACK_CHARS:
        return False
    text = content.lower()
    return _DONE.search(text) is not None and _NOT_DONE.search(text) is None


def tool_work(response: ResponseInfo) -> list[ToolCall]:
    """The response's calls that use a tool: not a transfer to another agent (`is_transfer`), nor a
    delegation (Agno's `delegate_task_to_member`, a call of an agent tool: a leader's work is handing out
    tasks). `handoff_cycle` judges both; the detectors that count how often a tool is used leave them out."""
    calls = response.tool_calls
    if not response.handoffs:
        return [call for call in calls if not is_transfer(call.name)]
    delegated = {h.call_id or h.tool for h in response.handoffs if h.kind is HandoffKind.DELEGATE}
    return [call for call in calls if not is_transfer(call.name) and (call.call_id or call.name) not in delegated]


def turn_signature(request: RequestInfo) -> tuple[str, str] | None:
    """The last assistant turn as one action: (hash of its calls and their results, a per-turn id).

    None when that turn made no tool calls but transfers to another agent
    (`is_transfer`: an acknowledged handoff is the same call and result in every
    round of a healthy review loop). Calls are sorted, so a parallel batch in
    another order is the same action. Computed once per request.
    """
    found: tuple[str, str] | None = request.derived.get("turn", _UNSIGNED)
    if found is not _UNSIGNED:
        return found
    if all(is_transfer(call.name) for call in request.prior_calls):
        return remember(request.derived, "turn", None)
    return remember(request.derived, "turn", _turn_signature(request))


def _turn_signature(request: RequestInfo) -> tuple[str, str]:
    answered = {i: r for i, r in zip(_call_positions(request), request.new_results, strict=True) if i is not None}
    parts = sorted(
        f"{call.name}\x00{call_args_digest(call)}\x00" + (result_digest_of(answered[i]) if i in answered else "-")
        for i, call in enumerate(request.prior_calls)
        if not is_transfer(call.name)
    )
    first = request.prior_calls[0].call_id
    return digest("\x01".join(parts)), tag(first or f"turn.{request.message_count}")
