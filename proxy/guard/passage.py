"""Passage: a request's way through the guard: admitted, answered or forwarded, read, ended exactly once.

Every handler (HTTP whole and streamed, an unreadable body, a Responses
WebSocket's `response.create`, a Realtime session's response) drives a
request the same way:

    async with guard.passage(adapter, info, body=..., key_hash=..., header_run=...) as p:
        if p.answer is not None:      # stopped: answer locally, nothing goes upstream
            return local(p.answer)
        p.forwarding()                # latency counts from here
        ...                           # whole: p.seen(info, status), then p.replacement()
                                      # stream: p.reading(parser, status) before relaying
        p.client_status = ...         # what the end records: client_status, error, body

The passage owns the end (`Guard.complete`: accounting, response plans,
breakers, the records) and runs it exactly once:

- on a normal exit, in place (shielded: a client that closes its connection
  the moment it has its answer cancels the handler, not the accounting), or
  with a state that waits, beside the relay (`judging`): the end starts in a
  task of its own, registered for its run so that the run's next request waits
  for it, and the handler returns once what finds a follow-up its run is
  written;
- when the client leaves (`CancelledError`, `ConnectionResetError`) or the
  handler fails, in the background, recorded as `client_disconnected` (or the
  failure's name) with what was read so far: no record is lost;
- with nothing seen from upstream, the end gives the request's in-flight slot
  back (a request answered locally gave it back when it was stopped).

The WebSocket relays, whose requests end in another message than the one
that began them, call `enter()` and `finish()` (or `leave()`) themselves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Protocol

from runguard.detectors.support import ResponseSeen
from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.core.tasks import hold
from runguard.proxy.guard.ending import Ends
from runguard.proxy.guard.judging import Judging
from runguard.proxy.guard.stages import Stages, own_cpu
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.providers.answers import Synthetic
from runguard.proxy.store.records import RecordedBody

CLIENT_LEFT = "client_disconnected"  # the error a passage whose client left is recorded with
_LEFT = (asyncio.CancelledError, ConnectionResetError)


class Judge(Protocol):
    """What a passage asks of the guard after admission (`Guard` is one): read a response, inspect a whole one
    before the client sees it, and end the request; `ends` marks a stream's end pending for every process
    (None with a state that never waits)."""

    ends: Ends | None
    local_ends: Judging | None  # with a state that never waits (memory): the marks are the process's own

    def response_seen(self, ticket: Ticket, info: ResponseInfo, status: int | None, latency: float) -> ResponseSeen: ...

    def inspect(self, ticket: Ticket, seen: ResponseSeen) -> Synthetic | None: ...

    async def remember(self, ticket: Ticket, seen: ResponseSeen) -> None: ...

    async def complete(
        self,
        ticket: Ticket,
        seen: ResponseSeen | None,
        *,
        client_status: int | None,
        error: str | None = None,
        body: RecordedBody | None = None,
        remembered: bool = False,
    ) -> None: ...


class Closing(Protocol):
    """A stream parser: what it read, once the stream is over (`close`)."""

    def close(self) -> ResponseInfo: ...


class Passage:
    """One request from admission to its record (see the module docstring).

    `client_status`, `error` and `body` are what the end records: the status the
    client got (a local answer's by default), the error that ended the request,
    and the request and response kept (`store.record_bodies`).
    """

    def __init__(
        self,
        guard: Judge,
        admit: Callable[[], Coroutine[Any, Any, Ticket]],
        finishing: set[asyncio.Task[None]],
        *,
        in_place: bool,
        judging: Judging | None = None,
        stages: Stages | None = None,
    ) -> None:
        self._guard = guard
        self._admit = admit
        self._finishing = finishing  # where ends run when the client left (the guard waits for them at shutdown)
        self._in_place = in_place  # the state never waits: an end cannot be cut half-way, run it inline
        self._judging = judging  # where the end runs beside the relay (None: in the handler)
        self._stages = stages or Stages()  # where admission and judging add their time
        self._ticket: Ticket | None = None
        self._seen: ResponseSeen | None = None
        self._reading: tuple[Closing, int | None] | None = None
        self._sent = time.perf_counter()
        self._ended = False
        self._marked = False  # the end is marked pending in the shared state (`ending`): taken back after it
        self._local_end: asyncio.Future[None] | None = None  # or in this process's (`Judge.local_ends`)
        self.client_status: int | None = None
        self.error: str | None = None
        self.body: RecordedBody | None = None

    @property
    def ticket(self) -> Ticket:
        """The request's ticket (once entered)."""
        if self._ticket is None:
            raise RuntimeError("the passage has not been entered")
        return self._ticket

    @property
    def answer(self) -> Synthetic | None:
        """The local answer of a stopped request (None: it may go upstream)."""
        return self.ticket.answer

    @property
    def ended(self) -> bool:
        """Whether the end has run or been started (`finish`, `leave`)."""
        return self._ended

    async def enter(self) -> Passage:
        """Admit the request (`Guard.admit`). A stopped request's `client_status` is its answer's."""
        self._ticket = await own_cpu(self._admit(), self._stages.admitted)
        self._sent = time.perf_counter()
        if self._ticket.answer is not None:
            self.client_status = self._ticket.answer.status
        return self

    def forwarding(self) -> None:
        """The request goes upstream now: its latency counts from here."""
        self._sent = time.perf_counter()

    def seen(self, info: ResponseInfo, status: int | None) -> ResponseSeen:
        """The response read (`info`, with the upstream's `status`; None if none came): the end accounts
        for it."""
        self._reading = None
        self._seen = self._guard.response_seen(self.ticket, info, status, time.perf_counter() - self._sent)
        return self._seen

    def reading(self, parser: Closing, status: int | None) -> None:
        """The response is read as it passes (a stream): unless `seen` is told otherwise, the end
        accounts for what `parser` has read by then, however the stream ended."""
        self._reading = (parser, status)

    async def ending(self) -> None:
        """A stream's last bytes are about to go out: mark its end pending for every process, once."""
        ends = self._guard.ends
        if self._marked or self._ticket is None:
            return
        if ends is not None:
            self._marked = True
            await ends.mark(self._ticket.ids)
        elif (local := self._guard.local_ends) is not None:
            self._marked = True
            self._local_end = local.open(self._ticket.ids.run)  # None past its limit: then no mark

    def replacement(self) -> Synthetic | None:
        """Before a whole response reaches the client: what it gets instead, if a detector stops it now
        (`Guard.inspect`); None to send it on."""
        if self._seen is None:
            return None
        return self._guard.inspect(self.ticket, self._seen)

    async def finish(self) -> None:
        """End the passage, once only; its client leaving meanwhile does not cut it short.

        With a `Judging`, the end is counted for its run (whose next request waits for it), what lets a
        follow-up find its run is written here and the rest starts beside the relay; without one (or with
        the judging full) the whole end is awaited here.
        """
        if self._ended:
            return
        self._ended = True
        self._read()
        if self._judging is not None and (end := self._judging.open(self.ticket.ids.run)) is not None:
            # What finds a follow-up its run, written now (no task to wait a turn of the loop for: another
            # replica may see the follow-up first), then the rest beside the relay. Should this handler be
            # cancelled mid-way, the whole end runs there instead.
            rest = self._end
            try:
                if self._seen is not None:
                    await self._guard.remember(self.ticket, self._seen)
                rest = self._judge
            finally:
                self._judging.start(end, rest)
            return
        if self._in_place:
            await self._end()
        else:
            await asyncio.shield(hold(self._finishing, self._end()))

    def leave(self, error: str = CLIENT_LEFT) -> None:
        """End the passage in the background, recorded with `error` (its client left). Once only."""
        if self._ended:
            return
        self._ended = True
        self.error = error
        self._read()
        if self._judging is None or not self._judging.submit(self.ticket.ids.run, self._end):
            hold(self._finishing, self._end())

    def _read(self) -> None:
        """Take the response as read: a stream's parser is closed here, however the stream ended."""
        if self._seen is None and self._reading is not None:
            parser, status = self._reading
            self.seen(parser.close(), status)

    async def _end(self) -> None:
        await self._complete(remembered=False)

    async def _judge(self) -> None:
        await self._complete(remembered=True)

    async def _complete(self, *, remembered: bool) -> None:
        try:
            ending = self._guard.complete(
                self.ticket,
                self._seen,
                client_status=self.client_status,
                error=self.error,
                body=self.body,
                remembered=remembered,
            )
            await own_cpu(ending, self._stages.judged)
        finally:
            ends = self._guard.ends
            if self._marked and ends is not None:  # its verdicts are written: a follower may be judged now
                await ends.unmark(self.ticket.ids)
            if self._local_end is not None and not self._local_end.done():
                self._local_end.set_result(None)

    async def __aenter__(self) -> Passage:
        return await self.enter()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        if exc is None:
            await self.finish()
        else:
            self.leave(CLIENT_LEFT if isinstance(exc, _LEFT) else type(exc).__name__)
