"""Incremental Server-Sent Events framing: bytes split anywhere in, whole events out.

Lines end in LF or CRLF (Gemini sends CRLF); a blank line ends an event.
Only `event:` and `data:` fields matter here; multi-line data is joined with
LF as the SSE spec says. Comments (`:`) and other fields are ignored, and, as
the spec says, an event with no `data:` line is not dispatched.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

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

        A streamed answer is mostly events of one `data: ` line, or an `event: `
        line and a `data: ` line. With no event under way and one line end
        throughout `text` (LF, or CRLF as Gemini sends), its whole events are
        cut at their blank lines in one call and such an event is read at once;
        any other is read line by line (what follows a blank line reads the
        same on its own).
        """
        start = 0
        if self._first:
            self._first = False
            if text.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark may open the stream
                start = 3
        if self._data or self._event is not None:
            return self._lines(text, start, events)
        if b"\r" not in text:
            end = b"\n"
        elif text.count(b"\r\n") == text.count(b"\r") == text.count(b"\n"):
            end = b"\r\n"
        else:
            return self._lines(text, start, events)
        blank = end + end
        cut = text.rfind(blank, start)
        if cut < 0:
            return self._lines(text, start, events)
        for block in text[start:cut].split(blank):
            if block[:6] == b"data: ":
                if end not in block:
                    events.append(SseEvent(None, block[6:]))
                    continue
            elif block[:7] == b"event: ":
                nl = block.find(end)
                data = nl + len(end)
                if nl > 0 and block[data : data + 6] == b"data: " and block.find(end, data) < 0:
                    events.append(SseEvent(block[7:nl].decode("utf-8", "replace"), block[data + 6 :]))
                    continue
            self._lines(block + blank, 0, events)
        return self._lines(text, cut + len(blank), events)

    def _lines(self, text: bytes, start: int, events: list[SseEvent]) -> int:
        """Read the lines of `text` from `start` to its last LF; returns where the unfinished rest starts.

        Only `data` and `event` fields count (the name is what precedes the
        first colon, so `data` alone is an empty value); a blank line ends an event.
        """
        last = text.rfind(b"\n")
        if last < start:
            return start
        data, held, event = self._data, self._held, self._event
        for raw in text[start:last].split(b"\n"):
            line = raw[:-1] if raw[-1:] == b"\r" else raw
            if not line:
                if data:
                    events.append(SseEvent(event, b"\n".join(data)))
                    data, held = [], 0
                event = None
            elif line[:5] == b"data:":
                value = line[6:] if line[5:6] == b" " else line[5:]
                data.append(value)
                held += len(value) + 1
            elif line[:6] == b"event:":
                event = (line[7:] if line[6:7] == b" " else line[6:]).decode("utf-8", "replace")
            elif line == b"data":
                data.append(b"")
                held += 1
            elif line == b"event":
                event = ""
        self._data, self._held, self._event = data, held, event
        return last + 1

    def rest(self) -> list[SseEvent]:
        """Events left when the stream closes without a final blank line."""
        if self.overflowed:
            return []
        # The unfinished line as if its line end came (a CR before it is cut as in CRLF), then a blank line.
        return self.feed(b"\n\n" if self._buffer else b"\n")


class SseObjects:
    """What every SSE stream parser starts with, said once: the stream split into events (`feed`, `rest`),
    each event's data read as JSON, an object handed to `take`, anything unreadable counted (`unparsable`).
    `DONE`: data that ends the stream instead (Chat's `[DONE]`: it sets `done`)."""

    DONE: ClassVar[bytes] = b""

    def __init__(self) -> None:
        self._sse = SseSplitter()
        self._bad = 0  # events whose data is not JSON
        self.done = False  # the stream's `DONE` came

    def feed(self, chunk: bytes) -> None:
        for event in self._sse.feed(chunk):
            self._event(event.data)

    def rest(self) -> None:
        """At the end of the stream: read the unterminated last event, if any."""
        for event in self._sse.rest():
            self._event(event.data)

    def _event(self, data: bytes) -> None:
        if self.DONE and data.startswith(self.DONE):
            self.done = True
            return
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            if data.strip():
                self._bad += 1
            return
        if type(payload) is dict:
            self.take(payload)

    def take(self, payload: dict[str, Any]) -> None:
        """One event's object."""
        raise NotImplementedError

    @property
    def unparsable(self) -> str | None:
        """The parse error of a stream with events that were not JSON; None when every one was."""
        return f"{self._bad} unparsable events" if self._bad else None
