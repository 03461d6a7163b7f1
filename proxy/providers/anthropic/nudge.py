"""Where a nudge's note goes in a Messages request (`guard.nudge`).

A text block appended to the last user message, after its tool results: Anthropic takes text after
`tool_result` blocks in one user turn, and the model reads the note last. Not in `system`: that is the
front of the prompt cache (a change there re-writes the whole cached prefix, at 1.25 to 2 times the
input rate), and not a message of its own (roles alternate). A last message that is not a user turn with
a list of blocks (a string question, an assistant prefill) is left as it is: the note is not carried.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.common.splice import append, member, object_start, skip_space, value_end


def with_note(body: bytes, data: dict[str, Any], note: str) -> bytes | None:
    """`body` (parsed: `data`) with the note as the last block of its last user message; None if it has none."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user" or not isinstance(last.get("content"), list):
        return None
    span = member(body, object_start(body), "messages")
    if span is None:
        return None
    start, at = None, skip_space(body, span[0] + 1)
    while at < span[1] - 1:  # to the last element of the array
        start = at
        at = skip_space(body, value_end(body, at))
        if body[at : at + 1] == b",":
            at = skip_space(body, at + 1)
    if start is None:
        return None
    return append(body, member(body, start, "content"), orjson.dumps({"type": "text", "text": note}))
