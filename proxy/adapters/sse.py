"""Incremental Server-Sent Events framing: bytes split anywhere in, whole events out.

Lines end in LF or CRLF (Gemini sends CRLF); a blank line ends an event.
Only `event:` and `data:` fields matter here; multi-line data is joined with
LF as the SSE spec says. Comments (`:`) and other fields are ignored, and, as
the spec says, an event with no `data:` line is not dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str | None
    data: bytes


class SseSplitter:
    """Feed chunks, get the events they complete; `rest()` gives an unterminated tail.

    Cost is linear in the bytes fed however they are split: the buffer only
    holds the unfinished line, each byte is searched for a line end once, and
    a consumed prefix is dropped from the front of a bytearray (no copy of the rest).
    """

    __slots__ = ("_buffer", "_data", "_event", "_first")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._event: str | None = None
        self._first = True

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buffer = self._buffer
        scanned = len(buffer)  # the unfinished line kept from before holds no LF
        buffer += chunk
        events: list[SseEvent] = []
        start = 0
        while (end := buffer.find(b"\n", max(start, scanned))) >= 0:
            self._line(bytes(buffer[start : end - 1 if end > start and buffer[end - 1] == 0x0D else end]), events)
            start = end + 1
        if start:
            del buffer[:start]
        return events

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if self._first:
            self._first = False
            line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark may open the stream
        if not line:
            if self._data:
                events.append(SseEvent(self._event, b"\n".join(self._data)))
            self._data, self._event = [], None
            return
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")

    def rest(self) -> list[SseEvent]:
        """Events left when the stream closes without a final blank line."""
        events: list[SseEvent] = []
        if self._buffer:
            line = bytes(self._buffer)
            self._buffer.clear()
            self._line(line.removesuffix(b"\r"), events)
        self._line(b"", events)
        return events
