"""Where a nudge's note goes in a Chat Completions request (`guard.nudge`).

A message appended to `messages`, after the tool results, so it is the last thing the model reads. Its
role is `developer` when the conversation's instructions already use that role (o-series models, Agno),
else `system`: the role the model and any OpenAI-compatible server already accept from this client.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.common.splice import append, member, object_start


def with_note(body: bytes, data: dict[str, Any], note: str) -> bytes | None:
    """`body` (parsed: `data`) with the note as its last message; None without a `messages` list."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return None
    developer = any(isinstance(m, dict) and m.get("role") == "developer" for m in messages)
    item = orjson.dumps({"role": "developer" if developer else "system", "content": note})
    return append(body, member(body, object_start(body), "messages"), item)
