"""`action: nudge`: a note to the model, added to one request in the provider's own form.

The first time a detector set to `nudge` fires in a run, the request is
forwarded with a short note saying what the agent keeps doing (the verdict's
reason: tool and agent names and counts, never content) and asking it to
change approach or answer. This is the one case where the proxy changes a
request (opt-in: no detector nudges by default), and the change is as small as
it can be: the note is spliced into the body's bytes, and every other byte of
the body stays as the client sent it (no re-serialization: numbers, escapes
and key order are the client's). Where the note goes is each API's own: its
spec's `nudge` splice (`providers/<api>/nudge.py`: a last message in Chat, a
developer input item in Responses, a part of Gemini's system instruction).

The note goes in a system (or developer) message, the most trusted place in
a conversation, and the names a reason quotes (tools, agents) are the
model's own output or the client's choice. So it never copies them as they
came: the reason is one JSON-quoted string in the note, every name in it is
cut to `MAX_NAME` characters, and control characters (newlines included)
are visible escapes: a tool named `x\n\nSYSTEM: ...` cannot open a line, a
paragraph or a message of its own.

A body the splice cannot place the note in (not a JSON object, no
`messages`/`input` list, an odd `systemInstruction`) is forwarded unchanged:
`with_note` returns None (fail open; the run is still counted as nudged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from runguard.proxy.core.events import Api
from runguard.proxy.core.ops import Op
from runguard.proxy.core.safe_text import printable
from runguard.proxy.guard import accounting
from runguard.proxy.guard.lineup.engine import Finding
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.providers import registry

MAX_REASON = 300  # characters of the verdict's reason quoted in the note
MAX_NAME = 48  # characters of a tool or agent name the reason quotes


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
    verdict = nudges[0].verdict
    note = note_for(nudges[0].detector, verdict.reason, _names(verdict.evidence))
    if now:
        ticket.note = note
    ticket.nudged |= {f.detector for f in nudges}
    return accounting.nudge_ops([f.detector for f in nudges], None if now else note)


def _names(evidence: Mapping[str, Any]) -> list[str]:
    """The texts a verdict's evidence names (a tool, an agent, a handoff's pair, a delegation chain)."""
    found: list[str] = []
    for value in evidence.values():
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found += [item for item in value if isinstance(item, str)]
    return found


def _short(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[:MAX_NAME] + "..."


def quoted_reason(reason: str, names: Iterable[str] = ()) -> str:
    """`reason` as the note quotes it: each of `names` in it cut to `MAX_NAME` characters (longest first, so a
    name inside another is not cut twice), control characters escaped, at most `MAX_REASON` characters, as
    one JSON string."""
    for name in sorted({n for n in names if len(n) > MAX_NAME}, key=len, reverse=True):
        reason = reason.replace(name, _short(name))
    return orjson.dumps(printable(reason[: MAX_REASON * 4])[:MAX_REASON]).decode()


def note_for(detector: str, reason: str, names: Iterable[str] = ()) -> str:
    """The note's text: what is repeating (the verdict's reason, quoted: see the module docstring) and what to
    do instead."""
    return (
        f"[RunGuard] This run looks stuck ({detector}): {quoted_reason(reason, names)}. "
        "Doing the same again will not give a different result. Change your approach (another tool, other "
        "arguments, or another agent), or give your final answer with what you have. "
        "If this pattern goes on, the run will be stopped."
    )


def with_note(api: Api, body: bytes, note: str) -> bytes | None:
    """`body` with `note` added where `api` puts instructions (its spec's `nudge` splice, see the module
    docstring); None if it cannot be."""
    spec = registry.api_named(api)
    if spec is None or spec.nudge is None:
        return None
    try:
        data = orjson.loads(body)
        if not isinstance(data, dict):
            return None
        return spec.nudge(body, data, note)
    except (orjson.JSONDecodeError, ValueError, IndexError):
        return None
