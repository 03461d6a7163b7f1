"""Incremental Server-Sent Events framing: bytes split anywhere in, whole events out.

Lines end in LF or CRLF (Gemini sends CRLF); a blank line ends an event.
Only `event:` and `data:` fields matter here; multi-line data is joined with
LF as the SSE spec says. Comments (`:`) and other fields are ignored, and, as
the spec says, an event with no `data:` line is not dispatched.
"""

from __future__ import annotations

from runguard.detectors.frozen import frozen


@frozen
class SseEvent:
    event: str | None
    data: bytes


class SseSplitter:
    """Feed chunks, get the events they complete; `rest()` gives an unterminated tail.

    Cost is linear in the bytes fed however they are split: the buffer only
    holds the unfinished line, each byte is searched for a line end once, and
    a consumed prefix is dropped from the front of a bytearray (no copy of the rest).

    Memory is bounded by `limit`: a line or an event larger than that (a
    stream that is not SSE, or a broken one) makes the splitter give up, set
    `overflowed` and ignore the rest of the stream. The relay forwards the
    bytes regardless; only what RunGuard reads from them is lost (fail open).
    """

    __slots__ = ("_buffer", "_data", "_event", "_first", "_held", "_limit", "overflowed")

    def __init__(self, limit: int = 32 * 1024 * 1024) -> None:
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._held = 0  # bytes in _data
        self._event: str | None = None
        self._first = True
        self._limit = limit
        self.overflowed = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if self.overflowed:
            return []
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
        if len(buffer) + self._held > self._limit:
            self._give_up()
            return []
        return events

    def _give_up(self) -> None:
        self.overflowed = True
        self._buffer = bytearray()
        self._data, self._held, self._event = [], 0, None

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if self._first:
            self._first = False
            line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark may open the stream
        if not line:
            if self._data:
                events.append(SseEvent(self._event, b"\n".join(self._data)))
            self._data, self._held, self._event = [], 0, None
            return
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._held += len(value) + 1
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")

    def rest(self) -> list[SseEvent]:
        """Events left when the stream closes without a final blank line."""
        events: list[SseEvent] = []
        if self.overflowed:
            return events
        if self._buffer:
            line = bytes(self._buffer)
            self._buffer.clear()
            self._line(line.removesuffix(b"\r"), events)
        self._line(b"", events)
        return events
