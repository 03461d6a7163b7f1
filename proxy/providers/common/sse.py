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

MAX_EVENT = 4 * 1024 * 1024  # bytes of one event read at most: a larger one is skipped (see `SseSplitter`)


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

    Memory and work are bounded by `limit` per event: an event whose lines
    grow past it (one 100 MB `data:` line, or a stream that is not SSE) is
    skipped, counted in `skipped`: what is held of it is dropped, the rest of
    an overlong line is passed over with one search for its end and never
    copied, and the events after it are read as usual. So one huge event
    costs the event loop next to nothing, and reading it whole (a JSON parse
    of its megabytes) never stalls the other streams. The relay forwards the
    bytes regardless; only what RunGuard reads from that event is lost (fail
    open: its usage may then be estimated).
    """

    __slots__ = ("_buffer", "_data", "_event", "_first", "_held", "_limit", "_passing", "_spoiled", "skipped")

    def __init__(self, limit: int = MAX_EVENT) -> None:
        self._buffer = bytearray()  # the unfinished line: holds no LF
        self._data: list[bytes] = []
        self._held = 0  # bytes in _data
        self._event: str | None = None
        self._first = True
        self._limit = limit
        self._passing = False  # the rest of an overlong line is passed over, up to its LF
        self._spoiled = False  # the event under way is too large: it is not dispatched
        self.skipped = 0  # events too large to read

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if self._passing:
            end = chunk.find(b"\n")
            if end < 0:
                return []
            self._passing = False
            chunk = chunk[end + 1 :]
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
        if buffer and len(buffer) + self._held > self._limit:
            self._spoil()
            buffer.clear()
            self._passing = True  # the line goes on past the limit: pass over the rest of it
        return events

    @property
    def overflowed(self) -> bool:
        """Whether an event was too large to read (`skipped`)."""
        return self.skipped > 0

    def _spoil(self) -> None:
        """The event under way is too large: drop what is held of it; it is not dispatched at its end."""
        if not self._spoiled:
            self.skipped += 1
        self._spoiled = True
        self._data, self._held = [], 0

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
        if self._data or self._event is not None or self._spoiled:
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
            if len(block) > self._limit:
                self.skipped += 1  # too large to read (see the class docstring)
                continue
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
        data, held, event, spoiled = self._data, self._held, self._event, self._spoiled
        for raw in text[start:last].split(b"\n"):
            line = raw[:-1] if raw[-1:] == b"\r" else raw
            if not line:
                if data and not spoiled:
                    events.append(SseEvent(event, b"\n".join(data)))
                data, held, event, spoiled = [], 0, None, False
            elif spoiled:
                continue  # a too large event's lines are not kept
            elif line[:5] == b"data:":
                value = line[6:] if line[5:6] == b" " else line[5:]
                held += len(value) + 1
                if held > self._limit:  # too large to read: not kept, not dispatched
                    self.skipped += 1
                    data, held, spoiled = [], 0, True
                    continue
                data.append(value)
            elif line[:6] == b"event:":
                event = (line[7:] if line[6:7] == b" " else line[6:]).decode("utf-8", "replace")
            elif line == b"data":
                data.append(b"")
                held += 1
            elif line == b"event":
                event = ""
        self._data, self._held, self._event, self._spoiled = data, held, event, spoiled
        return last + 1

    def rest(self) -> list[SseEvent]:
        """Events left when the stream closes without a final blank line."""
        if self._passing:
            self._passing = False
            self._buffer.clear()
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
        self._bad += self._sse.skipped  # events too large to read count as unparsable

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
