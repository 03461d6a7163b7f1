"""Incremental Server-Sent Events framing: bytes split anywhere in, whole events out.

Lines end in LF or CRLF (Gemini sends CRLF); a blank line ends an event.
Only `event:` and `data:` fields matter here; multi-line data is joined with
LF as the SSE spec says. Comments (`:`) and other fields are ignored, and, as
the spec says, an event with no `data:` line is not dispatched.
"""

from __future__ import annotations

from runguard.proxy.core.frozen import frozen


@frozen
class SseEvent:
    event: str | None
    data: bytes


class SseSplitter:
    """Feed chunks, get the events they complete; `rest()` gives an unterminated tail.

    Cost is linear in the bytes fed however they are split: a chunk without a
    line end only grows the unfinished line, and one with line ends is read
    in place (the unfinished line put in front): each line's field is
    recognized at its offset and only a value is copied out. This runs for
    every streamed event (a long answer has hundreds), so a line costs a few
    comparisons and one slice.

    Memory is bounded by `limit`: a line or an event larger than that (a
    stream that is not SSE, or a broken one) makes the splitter give up, set
    `overflowed` and ignore the rest of the stream. The relay forwards the
    bytes regardless; only what RunGuard reads from them is lost (fail open).
    """

    __slots__ = ("_buffer", "_data", "_event", "_first", "_held", "_limit", "overflowed")

    def __init__(self, limit: int = 32 * 1024 * 1024) -> None:
        self._buffer = bytearray()  # the unfinished line: holds no LF
        self._data: list[bytes] = []
        self._held = 0  # bytes in _data
        self._event: str | None = None
        self._first = True
        self._limit = limit
        self.overflowed = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if self.overflowed:
            return []
        events: list[SseEvent] = []
        buffer = self._buffer
        if b"\n" not in chunk:
            buffer += chunk
        else:
            if buffer:
                buffer += chunk
                chunk = bytes(buffer)
                buffer.clear()
            buffer += chunk[self._read_lines(chunk, events) :]
        if len(buffer) + self._held > self._limit:
            self._give_up()
            return []
        return events

    def _give_up(self) -> None:
        self.overflowed = True
        self._buffer = bytearray()
        self._data, self._held, self._event = [], 0, None

    def _read_lines(self, text: bytes, events: list[SseEvent]) -> int:
        """Read the whole lines of `text` (LF or CRLF ended); returns where the unfinished rest starts.

        Only `data` and `event` fields count (the name is what precedes the
        first colon, so `data` alone is an empty value); a blank line ends an event.
        """
        start = 0
        if self._first:
            self._first = False
            if text.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark may open the stream
                start = 3
        find, starts = text.find, text.startswith
        data, held, event = self._data, self._held, self._event
        while (end := find(b"\n", start)) >= 0:
            stop = end - 1 if end > start and text[end - 1] == 0x0D else end
            if stop == start:
                if data:
                    events.append(SseEvent(event, b"\n".join(data)))
                data, held, event = [], 0, None
            elif starts(b"data:", start, stop):
                value = text[start + 6 if text[start + 5 : start + 6] == b" " else start + 5 : stop]
                data.append(value)
                held += len(value) + 1
            elif starts(b"event:", start, stop):
                raw = text[start + 7 if text[start + 6 : start + 7] == b" " else start + 6 : stop]
                event = raw.decode("utf-8", "replace")
            elif stop - start == 4 and starts(b"data", start):
                data.append(b"")
                held += 1
            elif stop - start == 5 and starts(b"event", start):
                event = ""
            start = end + 1
        self._data, self._held, self._event = data, held, event
        return start

    def rest(self) -> list[SseEvent]:
        """Events left when the stream closes without a final blank line."""
        if self.overflowed:
            return []
        # The unfinished line as if its line end came (a CR before it is cut as in CRLF), then a blank line.
        return self.feed(b"\n\n" if self._buffer else b"\n")
