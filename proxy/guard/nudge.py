"""`action: nudge`: a note to the model, added to one request in the provider's own form.

The first time a detector set to `nudge` fires in a run, the request is
forwarded with a short note saying what the agent keeps doing (the verdict's
reason: tool and agent names and counts, never content) and asking it to
change approach or answer. This is the one case where the proxy changes a
request (opt-in: no detector nudges by default), and the change is as small as
it can be: the note is spliced into the body's bytes, and every other byte of
the body stays as the client sent it (no re-serialization: numbers, escapes
and key order are the client's). Where the note goes, per API:

- Chat Completions: a message appended to `messages`, after the tool results,
  so it is the last thing the model reads. Its role is `developer` when the
  conversation's instructions already use that role (o-series models, Agno),
  else `system`: the role the model and any OpenAI-compatible server already
  accept from this client. The response's shape is untouched.
- Responses: an `input` message item with role `developer`, appended (a string
  `input` becomes the equivalent user message followed by the note). Not
  `instructions`: they are echoed in the response object the SDK returns.
- Gemini: a text part appended to `systemInstruction` (created when absent).
  Not a turn in `contents`: Gemini wants a function-response turn to hold only
  function responses, and some models refuse two user turns in a row, so a
  text turn after the tool results can turn a working request into a 400.

A body the splice cannot place the note in (not a JSON object, no
`messages`/`input` list, an odd `systemInstruction`) is forwarded unchanged:
`with_note` returns None (fail open; the run is still counted as nudged).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from runguard.proxy.core.events import Api
from runguard.proxy.core.ops import Op
from runguard.proxy.guard import accounting
from runguard.proxy.guard.engine import Finding
from runguard.proxy.guard.ticket import Ticket

MAX_REASON = 300  # characters of the verdict's reason quoted in the note
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STRUCTURE = re.compile(rb'["\[\]{}]')
_SPACE = re.compile(rb"[ \t\r\n]*")
_SCALAR_END = re.compile(rb"[,\]}\s]")


def escalated(nudged: frozenset[str], findings: list[Finding]) -> list[Finding]:
    """`findings`, those of detectors that nudged the run before (`nudged`) as blocks: the pattern went on."""
    if not nudged or not findings:
        return findings
    return [f.escalated() if f.nudge and f.detector in nudged else f for f in findings]


def nudging(ticket: Ticket, nudges: list[Finding], *, now: bool) -> list[Op]:
    """A run's first findings by detectors set to `nudge`: the note for the model, and the ops remembering
    the detectors (their next finding in the run blocks). `now`: this request, not gone upstream yet,
    carries the note (`ticket.note`); else (a finding after a response) the run's next request does."""
    if not nudges:
        return []
    note = note_for(nudges[0].detector, nudges[0].verdict.reason)
    if now:
        ticket.note = note
    ticket.nudged |= {f.detector for f in nudges}
    return accounting.nudge_ops([f.detector for f in nudges], None if now else note)


def note_for(detector: str, reason: str) -> str:
    """The note's text: what is repeating (the verdict's reason) and what to do instead."""
    return (
        f"[RunGuard] This run looks stuck ({detector}): {reason[:MAX_REASON]}. "
        "Doing the same again will not give a different result. Change your approach (another tool, other "
        "arguments, or another agent), or give your final answer with what you have. "
        "If this pattern goes on, the run will be stopped."
    )


def with_note(api: Api, body: bytes, note: str) -> bytes | None:
    """`body` with `note` added where `api` puts instructions (see the module docstring); None if it cannot be."""
    try:
        data = orjson.loads(body)
        if not isinstance(data, dict):
            return None
        if api is Api.CHAT:
            return _chat(body, data, note)
        if api is Api.RESPONSES:
            return _responses(body, data, note)
        if api is Api.GEMINI:
            return _gemini(body, data, note)
    except (orjson.JSONDecodeError, ValueError, IndexError):
        return None
    return None


def _chat(body: bytes, data: dict[str, Any], note: str) -> bytes | None:
    messages = data.get("messages")
    if not isinstance(messages, list):
        return None
    developer = any(isinstance(m, dict) and m.get("role") == "developer" for m in messages)
    item = orjson.dumps({"role": "developer" if developer else "system", "content": note})
    return _append(body, _member(body, _object_start(body), "messages"), item)


def _responses(body: bytes, data: dict[str, Any], note: str) -> bytes | None:
    given = data.get("input")
    item = orjson.dumps({"type": "message", "role": "developer", "content": note})
    span = _member(body, _object_start(body), "input")
    if isinstance(given, list):
        return _append(body, span, item)
    if isinstance(given, str) and span is not None:
        start, end = span
        wrapped = b'[{"role":"user","content":' + body[start:end] + b"}," + item + b"]"
        return body[:start] + wrapped + body[end:]
    return None


def _gemini(body: bytes, data: dict[str, Any], note: str) -> bytes | None:
    part = orjson.dumps({"text": note})
    top = _object_start(body)
    name = "systemInstruction" if "systemInstruction" in data else "system_instruction"
    instruction = data.get(name)
    if instruction is None:
        added = b'"systemInstruction":{"parts":[' + part + b"]}"
        rest = _SPACE.match(body, top + 1)
        empty = rest is not None and body[rest.end() : rest.end() + 1] == b"}"
        return body[: top + 1] + added + (b"" if empty else b",") + body[top + 1 :]
    if not isinstance(instruction, dict) or not isinstance(instruction.get("parts"), list):
        return None
    span = _member(body, top, name)
    if span is None:
        return None
    return _append(body, _member(body, span[0], "parts"), part)


# -- finding spans in JSON bytes ----------------------------------------------------------------------


def _object_start(body: bytes) -> int:
    """Where the top-level object's `{` is (the body parsed as an object already)."""
    space = _SPACE.match(body, 0)
    return space.end() if space is not None else 0


def _skip_space(body: bytes, at: int) -> int:
    space = _SPACE.match(body, at)
    return space.end() if space is not None else at


def _value_end(body: bytes, at: int) -> int:
    """The index just past the JSON value that starts at `at`. Strings are skipped whole by a regex, and
    the scan jumps from one bracket or quote to the next: a long body costs a few thousand steps."""
    first = body[at : at + 1]
    if first == b'"':
        found = _STRING.match(body, at)
        if found is None:
            raise ValueError("unterminated string")
        return found.end()
    if first not in (b"[", b"{"):
        scalar = _SCALAR_END.search(body, at)
        return scalar.start() if scalar is not None else len(body)
    depth, position = 0, at
    while True:
        mark = _STRUCTURE.search(body, position)
        if mark is None:
            raise ValueError("unterminated value")
        char = body[mark.start() : mark.start() + 1]
        if char == b'"':
            position = _value_end(body, mark.start())
            continue
        depth += 1 if char in (b"[", b"{") else -1
        position = mark.end()
        if depth == 0:
            return position


def _member(body: bytes, start: int, key: str) -> tuple[int, int] | None:
    """The span of the value of `key` in the object whose `{` is at `start` (its last, as parsers read it)."""
    found = None
    at = _skip_space(body, start + 1)
    while body[at : at + 1] == b'"':
        key_end = _value_end(body, at)
        name = orjson.loads(body[at:key_end])
        at = _skip_space(body, key_end)
        if body[at : at + 1] != b":":
            raise ValueError("malformed object")
        value = _skip_space(body, at + 1)
        end = _value_end(body, value)
        if name == key:
            found = (value, end)
        at = _skip_space(body, end)
        if body[at : at + 1] == b",":
            at = _skip_space(body, at + 1)
    return found


def _append(body: bytes, span: tuple[int, int] | None, item: bytes) -> bytes | None:
    """`body` with `item` as the last element of the array at `span`."""
    if span is None or body[span[0] : span[0] + 1] != b"[":
        return None
    close = span[1] - 1
    empty = _skip_space(body, span[0] + 1) == close
    return body[:close] + (b"" if empty else b",") + item + body[close:]
