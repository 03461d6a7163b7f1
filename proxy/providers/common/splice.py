"""Finding spans in JSON bytes, to splice an item into a body without re-serializing it.

A nudge's note (`guard.nudge`) is added to a request by editing its bytes: every other byte stays as the
client sent it (numbers, escapes and key order are the client's). These functions find where a member's
value or an array's end is in a body already parsed as a JSON object (so it is well formed); each API's
splice (`openai_chat.nudge`, ...) uses them to place its note.
"""

from __future__ import annotations

import re

import orjson

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STRUCTURE = re.compile(rb'["\[\]{}]')
SPACE = re.compile(rb"[ \t\r\n]*")
_SCALAR_END = re.compile(rb"[,\]}\s]")


def object_start(body: bytes) -> int:
    """Where the top-level object's `{` is (the body parsed as an object already)."""
    space = SPACE.match(body, 0)
    return space.end() if space is not None else 0


def skip_space(body: bytes, at: int) -> int:
    space = SPACE.match(body, at)
    return space.end() if space is not None else at


def value_end(body: bytes, at: int) -> int:
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
            position = value_end(body, mark.start())
            continue
        depth += 1 if char in (b"[", b"{") else -1
        position = mark.end()
        if depth == 0:
            return position


def member(body: bytes, start: int, key: str) -> tuple[int, int] | None:
    """The span of the value of `key` in the object whose `{` is at `start` (its last, as parsers read it)."""
    found = None
    at = skip_space(body, start + 1)
    while body[at : at + 1] == b'"':
        key_end = value_end(body, at)
        name = orjson.loads(body[at:key_end])
        at = skip_space(body, key_end)
        if body[at : at + 1] != b":":
            raise ValueError("malformed object")
        value = skip_space(body, at + 1)
        end = value_end(body, value)
        if name == key:
            found = (value, end)
        at = skip_space(body, end)
        if body[at : at + 1] == b",":
            at = skip_space(body, at + 1)
    return found


def append(body: bytes, span: tuple[int, int] | None, item: bytes) -> bytes | None:
    """`body` with `item` as the last element of the array at `span`."""
    if span is None or body[span[0] : span[0] + 1] != b"[":
        return None
    close = span[1] - 1
    empty = skip_space(body, span[0] + 1) == close
    return body[:close] + (b"" if empty else b",") + item + body[close:]
