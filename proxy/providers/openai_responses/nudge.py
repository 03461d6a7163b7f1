"""Where a nudge's note goes in a Responses request (`guard.nudge`).

An `input` message item with role `developer`, appended (a string `input` becomes the equivalent user
message followed by the note). Not `instructions`: they are echoed in the response object the SDK returns.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.common.splice import append, member, object_start


def with_note(body: bytes, data: dict[str, Any], note: str) -> bytes | None:
    """`body` (parsed: `data`) with the note as its last input item; None when `input` is neither a list
    nor a string."""
    given = data.get("input")
    item = orjson.dumps({"type": "message", "role": "developer", "content": note})
    span = member(body, object_start(body), "input")
    if isinstance(given, list):
        return append(body, span, item)
    if isinstance(given, str) and span is not None:
        start, end = span
        wrapped = b'[{"role":"user","content":' + body[start:end] + b"}," + item + b"]"
        return body[:start] + wrapped + body[end:]
    return None
