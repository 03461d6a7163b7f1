"""Small, forgiving readers over parsed JSON: wrong types read as empty, never raise."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

TOO_DEEP = "<JSON nested too deep>"


def load_object(body: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The body as a JSON object, or (None, why not)."""
    if not body:
        return None, "empty body"
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(data, dict):
        return None, "the body is not a JSON object"
    return data, None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def opt_str(value: Any) -> str | None:
    """A string field that may be absent: anything but a non-empty string reads as None.

    Ids, names and reasons go into frozen records, dict keys and shared state,
    so a list or an object where the wire should have a string must not leak in.
    """
    return value if isinstance(value, str) and value else None


def as_int(value: Any) -> int:
    """A count or an index: a non-negative JSON integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def pick(data: dict[str, Any], camel: str, snake: str) -> Any:
    """Gemini accepts both spellings of a key (ADK mixes them); camelCase wins."""
    value = data.get(camel)
    return data.get(snake) if value is None else value


def text_of(content: Any) -> str:
    """The text in a message content: a string, or a list of parts with `text` (or `refusal`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if not isinstance(text, str):
                    text = part.get("refusal")
                if isinstance(text, str):
                    pieces.append(text)
        return "\n".join(pieces)
    return ""


def dumps_text(value: Any) -> str:
    """A JSON value as compact text (tool arguments and results given as objects)."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson stops at 255 levels; the stdlib goes deeper, until the interpreter's limit
        pass
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (RecursionError, TypeError, ValueError):
        return TOO_DEEP


def dumped_length(value: Any) -> int:
    """`len(dumps_text(value))` without building the text: a tool result's size, counted on every
    request for each earlier turn of a conversation (ASCII JSON has as many characters as bytes)."""
    if isinstance(value, str):
        return len(value)
    try:
        raw = orjson.dumps(value)
    except TypeError:
        return len(dumps_text(value))
    return len(raw) if raw.isascii() else len(raw.decode())


class JsonArrayItems:
    """The objects of a JSON array that arrives in pieces, each handed out once it closes.

    Gemini's `:streamGenerateContent` without `alt=sse` streams one array of
    responses; reading its items as they complete keeps what a truncated
    stream said. Only brackets, braces, quotes and escapes are looked at (a
    regex finds the next one), so the cost is linear in the bytes; items are
    not validated here (the caller parses each one).
    """

    __slots__ = ("_depth", "_escape", "_in_string", "_item")
    _STRUCTURE = re.compile(rb'[][{}"]')
    _IN_STRING = re.compile(rb'["\\]')

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._item = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        items: list[bytes] = []
        start: int | None = 0 if self._depth >= 2 else None  # where the open item's bytes begin in `chunk`
        pos = 0
        while pos < len(chunk):
            if self._escape:
                self._escape, pos = False, pos + 1
                continue
            found = (self._IN_STRING if self._in_string else self._STRUCTURE).search(chunk, pos)
            if found is None:
                break
            pos, token = found.end(), chunk[found.start()]
            if self._in_string:
                self._escape, self._in_string = token == 0x5C, token == 0x5C
            elif token == 0x22:
                self._in_string = True
            elif token in b"[{":
                self._depth += 1
                start = found.start() if self._depth == 2 else start
            elif self._depth:
                if self._depth == 2 and start is not None:
                    self._item += chunk[start:pos]
                    items.append(bytes(self._item))
                    self._item.clear()
                    start = None
                self._depth -= 1
        if start is not None and self._depth >= 2:
            self._item += chunk[start:]
        return items
