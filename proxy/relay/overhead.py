"""What RunGuard itself cost a request, said on its response: `x-runguard-overhead-ms`.

A `Stopwatch` starts when the app's catch-all route receives the request
(`Metrics.counted`, before the handler reads the body) and is stamped just
before the response headers go to the client. The overhead is the time in
between less the time spent waiting for the upstream: from sending the request
to its response headers (a stream), or to its last byte (a whole response,
which RunGuard reads before answering). So it counts reading and parsing the
request, admission (state and detectors), building the upstream request and,
for a whole response, parsing and inspecting it; it does not count the relay of
a stream's events nor the accounting after the answer (`Guard.complete`): they
happen after the headers are sent (`runguard_proxy_overhead_ms` has them).

The handler marks the waits (`sending`, `answered`: the exchange looks its
stopwatch up once, `of`, and marks them on it) and stamps the headers (`stamp`);
each is a clock read.
A response answered locally (a block, an error) is stamped by `Metrics.counted`
when the handler returns it unsent. The app's metrics read `Stopwatch.stamped`
for the `runguard_overhead_ms{provider,api}` histogram (the header's value).
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import TypeVar

from aiohttp import web

HEADER = "x-runguard-overhead-ms"
H = TypeVar("H", bound=MutableMapping[str, str])


class Stopwatch:
    """A request's proxy time: wall time since `started`, less the upstream waits."""

    __slots__ = ("_sent", "stamped", "started", "waited")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.waited = 0.0  # seconds waiting for the upstream
        self._sent: float | None = None  # a wait under way since then
        self.stamped: float | None = None  # the overhead written on the response (ms), once stamped

    def sending(self) -> None:
        self._sent = time.perf_counter()

    def answered(self) -> None:
        if self._sent is not None:
            self.waited += time.perf_counter() - self._sent
            self._sent = None

    def ms(self) -> float:
        """The overhead so far; a wait still open (the upstream failed) counts as waiting."""
        self.answered()
        return max(0.0, (time.perf_counter() - self.started - self.waited) * 1000)

    def stamp(self, headers: H) -> H:
        """Write the overhead so far into `headers` (a response's, before it is prepared) and keep it for the
        metric; a response is stamped once. Returns `headers`."""
        if self.stamped is None:
            self.stamped = self.ms()
            headers[HEADER] = f"{self.stamped:.3f}"
        return headers


_KEY: web.RequestKey[Stopwatch] = web.RequestKey("runguard_overhead", Stopwatch)  # a request's stopwatch


def start(request: web.Request) -> Stopwatch:
    watch = request[_KEY] = Stopwatch()
    return watch


def of(request: web.Request) -> Stopwatch | None:
    return request.get(_KEY)


def sending(request: web.Request) -> None:
    """The request goes upstream now: what follows until `answered` is the upstream's time."""
    watch = of(request)
    if watch is not None:
        watch.sending()


def answered(request: web.Request) -> None:
    watch = of(request)
    if watch is not None:
        watch.answered()


def stamp(request: web.Request, headers: H) -> H:
    """`Stopwatch.stamp` of the request's stopwatch, if it has one. Returns `headers`."""
    watch = of(request)
    return watch.stamp(headers) if watch is not None else headers
