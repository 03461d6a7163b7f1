"""Framing: how a provider's response stream is cut into whole units, and how an error ends it.

Most streams are server-sent events: a unit is an event (ended by a blank line) and an error that ends a
stream early is one more event, the adapter's (`Adapter.stream_error_event`). A provider whose stream is
framed otherwise (Gemini's `:streamGenerateContent` without `alt=sse` streams one JSON array, whose error
is one more array element) supplies its own `Framing` through its spec (`ProviderApi.framing`, chosen per
request from its query). The relay asks the framing what may be sent of each chunk (`Held.take`) and how
to end the stream with an error (`Held.ending`); the handlers ask it for the adapter whose answers are
framed as its clients read them (`Framing.framed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers.base import Adapter

MAX_PENDING_EVENT = 1 << 20  # bytes of one unfinished unit (an SSE event, an array element) held back at most


class Held(Protocol):
    """Lets whole units of a stream through and ends it with an error after the last one."""

    pending: bytes

    def take(self, chunk: bytes) -> bytes:
        """What of `chunk` (after what was held back) may be sent now."""
        ...

    def ending(self, error: bytes) -> bytes:
        """The bytes that end the stream, as let through so far, with `error` (one unit) last."""
        ...


def _same(adapter: Adapter) -> Adapter:
    return adapter


@frozen
class Framing:
    """A stream's framing. `hold(sse, on)`: what holds back an unfinished unit, given whether the upstream
    answered with SSE (`text/event-stream`) and whether holding is wanted (`on`: an error may end the stream
    and the bytes are plain); `framed`: the adapter whose stop answers and error events are in this framing."""

    name: str
    hold: Callable[[bool, bool], Held]
    framed: Callable[[Adapter], Adapter] = _same


class WholeEvents:
    """Holds back the bytes of an unfinished SSE event until its blank line arrives (when `on`)."""

    __slots__ = ("on", "pending")

    def __init__(self, on: bool) -> None:
        self.on = on
        self.pending = b""

    def take(self, chunk: bytes) -> bytes:
        if not self.on:
            return chunk
        chunk = self.pending + chunk if self.pending else chunk
        cut = _events_end(chunk)
        chunk, self.pending = chunk[:cut], chunk[cut:]
        if len(self.pending) > MAX_PENDING_EVENT:  # not SSE after all: stop waiting for event ends
            chunk, self.pending, self.on = chunk + self.pending, b"", False
        return chunk

    def ending(self, error: bytes) -> bytes:
        """An SSE error event follows the last whole event as it is."""
        return error


def _events_end(data: bytes) -> int:
    """Where the last complete SSE event in `data` ends (0: none)."""
    lf = data.rfind(b"\n\n")
    crlf = data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def _hold_events(sse: bool, on: bool) -> WholeEvents:
    return WholeEvents(on and sse)


SSE = Framing("sse", _hold_events)


def sse_framing(stream: bool, query: Mapping[str, str]) -> Framing:
    """Every stream is SSE (the default `ProviderApi.framing`)."""
    return SSE
