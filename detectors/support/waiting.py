"""A job polled until it is done: an answer that only says it is still running.

An agent that starts a long job in the background (a build, an extraction, a search over a home folder)
checks on it: Claude Code's `BashOutput` answers `<status>running</status>` and a timestamp, a job API
`{"status": "pending"}`, until the job ends. The answer cannot change before the job does, so the same
answer again is the agent waiting, not a tool failing the same way: how long it may wait, and how fast it
may ask, is `non_progress`'s to judge (`poll_patience`), and the detectors that count repeats leave such
polls to it.

- `still_running`: an answer that says the job has not finished: a status word (running, pending, queued, in
  progress, processing, not finished) and nothing else (timestamps and ids aside); or a command job's status
  line or tag saying so (`<status>running</status>`, "Status: running") over what the job printed so far. A
  log is silent while the job works through a long step (a large book embedded between two "done" lines):
  the same output again is the job working, and a new line ends the streak. A job's answer with a figure
  of its own (`{"status": "running", "progress": 20}`) is judged as any answer: the same figure again says
  the job did not move.
"""

from __future__ import annotations

import re

from runguard.detectors.support.commands import TRIVIAL_CHARS
from runguard.detectors.support.normalize import DEFAULT_VOLATILE, remember, result_json, strip_volatile
from runguard.proxy.core.events import ToolResult

_RUNNING = re.compile(
    r"\b(?:still\s+)?(?:running|pending|queued|in[ _-]?progress|processing"
    r"|not\s+(?:yet\s+)?(?:finished|done|complete|completed))\b"
)
# A command job's status, first in its answer (Claude Code's `BashOutput`), over what the job printed.
_STATUS = re.compile(r"^\s*(?:<status>|status:)\s*(?:still\s+)?(?:running|pending|queued|in[ _-]?progress)\b")
STATUS_CHARS = 200  # where a command job's answer says its status: its start
# What frames a status: tags (`<status>`), its labels, punctuation, and what `strip_volatile` left of a time.
_FRAME = re.compile(r"</?[a-z_-]+>|\b(?:status|state|phase|job|process|task|is|yet)\b|[\s#.:,;\[\](){}\"'=-]+")


_MEMO = "running"


def still_running(result: ToolResult) -> bool:
    """Whether a result says the job it was asked about is still running (see the module's docstring).
    Read once per result: non_progress, repeat_call, stagnation and oscillation ask of the same results."""
    found: bool | None = result.derived.get(_MEMO)
    return found if found is not None else remember(result.derived, _MEMO, _still_running(result))


def _still_running(result: ToolResult) -> bool:
    content = result.content
    if _STATUS.match(content[:STATUS_CHARS].lower()):
        return True
    if len(content) > TRIVIAL_CHARS or not content.strip():
        return False
    value = result.value if result.value is not None else result_json(result)
    if isinstance(value, dict):
        kept = [(key, item) for key, item in value.items() if key.lower() not in DEFAULT_VOLATILE]
        if not all(isinstance(item, str) for _, item in kept):
            return False  # a figure (progress, a count) or more: how far the job got
        text = " ".join(f"{key} {item}" for key, item in kept)
    else:
        text = strip_volatile(content)
    text = text.lower()
    if _RUNNING.search(text) is None:
        return False
    return _FRAME.sub("", _RUNNING.sub("", text)) == ""
