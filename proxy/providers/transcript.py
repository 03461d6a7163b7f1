"""Transcript: what a recorded request body says, as the lines a person reads (the run page, `show`).

Each API reads its own bodies (`ProviderApi.transcript`): the new tail of the conversation a request
carries (everything after its last assistant turn: the tool results an agent sends back, a new user
message), and on a run's first request its system prompt too. A tool result is titled with the name of
the call it answers when the body names it. What a transcript cannot read it leaves out (fail open: it is
only a view); the answer's lines are the adapter's (`admin.ui.content`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from runguard.proxy.core.frozen import frozen


@frozen
class Line:
    """One line of a transcript: `kind` (system, user, tool result, assistant, tool call, handoff, error),
    `title` (a role, a tool's name), `text`."""

    kind: str
    title: str
    text: str


Transcript = Callable[[dict[str, Any], bool], list[Line]]
"""(a request body's object, whether it is its run's first request) -> its lines (`ProviderApi.transcript`)."""


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or parts whose `text` is kept (any other part is named by
    its type, `[image]`); anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    return "" if content is None else orjson.dumps(content).decode()


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part)
    text = part.get("text")
    return text if isinstance(text, str) else f"[{part.get('type', 'part')}]"


def after_last(items: list[Any], answered: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The objects of `items` after the last one `answered` says is the model's (all of them if none is)."""
    last = max((i for i, item in enumerate(items) if isinstance(item, dict) and answered(item)), default=-1)
    return [item for item in items[last + 1 :] if isinstance(item, dict)]


def names_of(calls: Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """Call id -> tool name, from (id, name) pairs (those not both strings left out)."""
    return {call_id: name for call_id, name in calls if isinstance(call_id, str) and isinstance(name, str)}
