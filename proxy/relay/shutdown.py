"""One clock for a graceful stop: `server.shutdown_grace_seconds` bounds all of it.

The stop begins when the server stops accepting (the app's `on_shutdown`).
In-flight streams may run for `drain` seconds; the rest of the grace period
(`reserve`: a fifth of it, at most `MAX_RESERVE` seconds) is kept for what
must follow them: the background work that finishes their records, the
guard's undos, and the record store's last flush. Streams still open when
`drain` ends are cut: their relay ends each with the provider's own error
event (`relay.StreamCut`), so an SDK raises a clean error rather than
reading a truncated body. Every later step waits at most `remaining()`.

aiohttp's own wait for the handlers (`handlers_wait`) ends half the reserve
after the cut, not at the same moment: the cut handlers write their error
event and return in that time, so aiohttp never gives up on a handler that is
ending (it would then cancel its wait under it, and the handler's end would
log an `InvalidStateError` traceback, one per cut stream, and hold the stop
past its grace).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from aiohttp import StreamReader

RESERVE_SHARE = 0.2  # of the grace period, kept for records and undos after the streams
MAX_RESERVE = 5.0  # seconds: a longer grace goes to the streams
CUT_SHARE = 0.5  # of the reserve, for the cut streams' handlers to end before aiohttp stops waiting for them


class StreamCut(Exception):
    """Raised into a relayed stream's upstream reader when the shutdown's drain time is over."""


def reserve_of(grace: float) -> float:
    """Seconds of `grace` kept for the work after the streams."""
    return min(grace * RESERVE_SHARE, MAX_RESERVE)


def handlers_wait(grace: float) -> float:
    """aiohttp's `shutdown_timeout`: the streams' drain time and half the reserve, in which the streams cut at
    the end of their drain time end their handlers."""
    reserve = reserve_of(grace)
    return grace - reserve + reserve * CUT_SHARE


class Shutdown:
    """The deadline of one graceful stop, and the streams it cuts when their time is over."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.drain = grace - reserve_of(grace)
        self._ends: float | None = None  # loop time the whole stop must be over by
        self._streams: set[StreamReader] = set()
        self._cutter: asyncio.TimerHandle | None = None
        self._cut = False
        self.cut_streams = 0  # streams ended by `cut` (for the log and the tests)

    @property
    def begun(self) -> bool:
        return self._ends is not None

    def begin(self) -> None:
        """Start the clock (once): streams are cut `drain` seconds from now."""
        if self._ends is not None:
            return
        loop = asyncio.get_running_loop()
        self._ends = loop.time() + self.grace
        self._cutter = loop.call_later(self.drain, self.cut)

    def remaining(self) -> float:
        """Seconds left of the grace period (all of it before the stop begins)."""
        if self._ends is None:
            return self.grace
        return max(0.0, self._ends - asyncio.get_running_loop().time())

    @contextlib.contextmanager
    def streaming(self, content: StreamReader) -> Iterator[None]:
        """While the block runs, `content` (an upstream body being relayed) is cut with the others."""
        if self._cut:  # a stream that starts after the cut is cut at once
            content.set_exception(StreamCut())
        self._streams.add(content)
        try:
            yield
        finally:
            self._streams.discard(content)

    def cut(self) -> None:
        """End every stream still being relayed: its next read raises `StreamCut`."""
        self._cut = True
        if self._cutter is not None:
            self._cutter.cancel()
        for content in list(self._streams):
            if content.exception() is None and not content.at_eof():
                content.set_exception(StreamCut())
                self.cut_streams += 1
