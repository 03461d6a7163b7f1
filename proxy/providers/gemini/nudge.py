"""Where a nudge's note goes in a generateContent request (`guard.nudge`).

A text part appended to `systemInstruction` (created when absent). Not a turn in `contents`: Gemini wants
a function-response turn to hold only function responses, and some models refuse two user turns in a row,
so a text turn after the tool results can turn a working request into a 400.

A request that names cached content (`cachedContent`: ADK's context cache, LangChain's `cached_content`) gets
no note: Gemini refuses a system instruction beside it (400 INVALID_ARGUMENT), and the cache holds its own. The
run still counts as nudged, so the pattern going on blocks it.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.common.splice import SPACE, append, member, object_start


def with_note(body: bytes, data: dict[str, Any], note: str) -> bytes | None:
    """`body` (parsed: `data`) with the note as the last part of its system instruction; None when that
    instruction has an odd shape, or the request names cached content."""
    if "cachedContent" in data or "cached_content" in data:
        return None
    part = orjson.dumps({"text": note})
    top = object_start(body)
    name = "systemInstruction" if "systemInstruction" in data else "system_instruction"
    instruction = data.get(name)
    if instruction is None:
        added = b'"systemInstruction":{"parts":[' + part + b"]}"
        rest = SPACE.match(body, top + 1)
        empty = rest is not None and body[rest.end() : rest.end() + 1] == b"}"
        return body[: top + 1] + added + (b"" if empty else b",") + body[top + 1 :]
    if not isinstance(instruction, dict) or not isinstance(instruction.get("parts"), list):
        return None
    span = member(body, top, name)
    if span is None:
        return None
    return append(body, member(body, span[0], "parts"), part)
