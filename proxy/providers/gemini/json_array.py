"""Gemini's streamed JSON array (`:streamGenerateContent` without `alt=sse`), element by element.

Such a stream is one JSON array sent in pieces (`[{...}\\n,\\r\\n{...}\\n]`).
When the proxy must end it early (the upstream broke off, the shutdown cut
it), the error has to arrive as one more element of that array, so the client
still reads valid JSON whose last element is `{"error": ...}`. `WholeElements`
lets bytes through only up to the end of the last complete element (holding
back an unfinished one, as `relay` holds back an unfinished SSE event) and
knows what closes the array from there.

It scans only the bytes that matter to JSON's structure (brackets, braces,
quotes, commas, backslashes), with a regular expression, so a text-heavy
element costs little Python work. Anything that is not an array, or an
element larger than `limit`, turns it off: the rest passes as it comes and no
error element is spliced in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.framing import MAX_PENDING_EVENT, SSE, Framing, Held, WholeEvents
from runguard.proxy.providers.gemini.adapter import GeminiAdapter, GeminiArrayAdapter

_STRUCTURE = re.compile(rb'[\[\]{}",\\]')
_SPACE = b" \t\r\n"

# Where the array stands at the last byte let through.
START = 0  # nothing of the array yet
OPEN = 1  # after `[` or `,`: an element may follow
AFTER = 2  # after a complete element
CLOSED = 3  # after the closing `]`


class WholeElements:
    """Holds back the bytes of an unfinished array element; says what ends the array with one more."""

    __slots__ = ("_depth", "_escape", "_in_string", "_limit", "_safe_state", "_state", "on", "pending")

    def __init__(self, on: bool = True, limit: int = 1 << 20) -> None:
        self.on = on
        self.pending = b""  # bytes held back, after the last safe point
        self._limit = limit
        self._depth = 0
        self._in_string = False
        self._escape = False  # the next byte (at the start of the next chunk) is escaped
        self._state = START  # at the end of everything scanned
        self._safe_state = START  # at the end of what was let through

    def take(self, chunk: bytes) -> bytes:
        """What of `chunk` (after what was held back) may be sent now."""
        if not self.on:
            return chunk
        data = self.pending + chunk if self.pending else chunk
        safe = self._scan(data, len(self.pending))
        if not self.on:  # not an array after all
            self.pending = b""
            return data
        sending, self.pending = data[:safe], data[safe:]
        if len(self.pending) > self._limit:
            self.on, self.pending = False, b""
            return data
        return sending

    def ending(self, element: bytes) -> bytes:
        """Bytes that end the array (as let through so far) with `element` last; empty when off or closed."""
        if not self.on or self._safe_state == CLOSED:
            return b""
        if self._safe_state == START:
            return b"[" + element + b"]"
        if self._safe_state == OPEN:
            return element + b"]"
        return b"," + element + b"]"

    def _scan(self, data: bytes, start: int) -> int:
        """Scan `data[start:]` (what precedes was scanned before); the end of the last safe point in `data`."""
        safe = 0
        if self._state == START and self._depth == 0:
            head = data[start:].lstrip(_SPACE)
            if head and head[:1] != b"[":
                self.on = False
                return 0
        skip = start if self._escape else -1
        self._escape = False
        for found in _STRUCTURE.finditer(data, start):
            pos = found.start()
            if pos == skip:
                continue
            char = data[pos]
            if self._in_string:
                if char == 0x5C:  # backslash: the next byte is escaped
                    if pos + 1 == len(data):
                        self._escape = True
                    skip = pos + 1
                elif char == 0x22:
                    self._in_string = False
                continue
            if char == 0x22:
                self._in_string = True
            elif char in (0x7B, 0x5B):  # { [
                self._depth += 1
                if self._depth == 1:
                    self._state, self._safe_state, safe = OPEN, OPEN, pos + 1
            elif char in (0x7D, 0x5D):  # } ]
                self._depth -= 1
                if self._depth == 1:
                    self._state, self._safe_state, safe = AFTER, AFTER, pos + 1
                elif self._depth == 0:
                    self._state, self._safe_state, safe = CLOSED, CLOSED, pos + 1
            elif char == 0x2C and self._depth == 1:  # a comma between elements
                self._state, self._safe_state, safe = OPEN, OPEN, pos + 1
        return safe  # 0: no safe point in this piece, all of it waits


def _hold(sse: bool, on: bool) -> Held:
    """Whole elements; whole events if the upstream answered with SSE after all."""
    return WholeEvents(on) if sse else WholeElements(on, MAX_PENDING_EVENT)


def _array_adapter(adapter: Adapter) -> Adapter:
    return adapter.arrayed() if isinstance(adapter, GeminiAdapter) else GeminiArrayAdapter()


JSON_ARRAY = Framing("json_array", _hold, _array_adapter)


def streams_sse(query: Mapping[str, str]) -> bool:
    """Whether a :streamGenerateContent request asked for SSE (`alt=sse`; `$alt` is the same parameter).

    Without it the method streams one JSON array (`$alt=json`, or no `alt` at all).
    """
    value = query.get("alt", query.get("$alt", ""))
    return value.partition(";")[0].strip().lower() == "sse"


def framing(stream: bool, query: Mapping[str, str]) -> Framing:
    """A stream's framing: one JSON array unless the request asked for SSE (`ProviderApi.framing`)."""
    return JSON_ARRAY if stream and not streams_sse(query) else SSE
