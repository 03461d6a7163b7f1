"""Slow and idle clients are bounded: a deadline for a request's head, for each wait on its body, and for idling.

aiohttp's server waits as long as a client likes for a request's head (a
slowloris sends it a byte at a time and holds the connection for good) and
for each piece of its body; it closes an idle keep-alive connection after
`keepalive_timeout` (3,630 s unless told). Every connection the proxy accepts
gets a `Watchdog`, which closes it when:

- the request head (request line and headers) has not all arrived
  `header` seconds after its first byte, or after the connection opened (a
  connection that sends nothing at all is closed as well): total time, as
  nginx's `client_header_timeout`, since dripping bytes must not extend it;
- no byte of a request body it is receiving has come for `body` seconds
  (between reads, as nginx's `client_body_timeout`: a long upload that keeps
  moving is never cut). Time the proxy itself is not reading (the body waits
  for the handler, which reads it at its own pace) does not count. Closing
  the connection ends the request's handler: a guarded request whose body
  never came whole is not forwarded, and a body already streaming upstream
  (a file upload) is abandoned there.

Idle keep-alive connections are closed by aiohttp after `keepalive`
seconds (`keepalive_timeout`, set by `server.start`). A response that takes
long to send (a stream to the client) is none of these: it is never cut.
WebSockets, once upgraded, are left to their own lifetimes.

aiohttp tells no one where a connection stands, so the watchdog reads three
of its request handler's attributes (`_request_count`, `_messages`,
`_upgraded`); `tests/e2e/test_slow_clients.py` fails if they change meaning.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from aiohttp import StreamReader, web
from aiohttp.web_protocol import RequestHandler

from runguard.config import ServerSettings
from runguard.proxy.core.frozen import frozen

log = logging.getLogger("runguard.server")


@frozen
class ClientTimeouts:
    """Seconds: the whole request head, each wait for body bytes, an idle keep-alive connection."""

    header: float = 20.0
    body: float = 60.0
    keepalive: float = 75.0

    @classmethod
    def of(cls, server: ServerSettings) -> ClientTimeouts:
        return cls(server.header_timeout, server.body_timeout, server.keepalive_timeout)


class Watchdog(asyncio.Protocol):
    """One connection's aiohttp request handler, with its head and body deadlines kept.

    It passes every protocol event on to the handler and notes what each
    received chunk was: a request head arriving, body bytes, or neither. One
    timer per connection, armed for the nearest deadline and moved only when
    it fires (progress makes deadlines later, never earlier, except when a
    new head begins), so a chunk costs a few attribute reads.
    """

    def __init__(self, handler: RequestHandler, timeouts: ClientTimeouts, loop: asyncio.AbstractEventLoop) -> None:
        self._handler = handler
        self._timeouts = timeouts
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._head_since: float | None = None  # when the head now arriving began (None: no head arriving)
        self._body: StreamReader | None = None  # the body of the newest request
        self._body_seen = 0.0  # when bytes of that body last came
        self._timer: asyncio.TimerHandle | None = None

    # -- the protocol, passed on ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes
        self._handler.connection_made(transport)
        self._head_since = self._loop.time()  # the first request's head is due from the start
        self._arm()

    def data_received(self, data: bytes) -> None:
        handler = self._handler
        body = self._body
        in_body = body is not None and not body.is_eof()
        parsed = handler._request_count
        handler.data_received(data)
        if handler._upgraded:
            return
        if handler._request_count != parsed and handler._messages:  # a head is complete: its request begins
            self._head_since = None
            self._body = handler._messages[-1][1]
            self._body_seen = self._loop.time()
        elif in_body:
            self._body_seen = self._loop.time()
        elif self._head_since is None and data:
            self._head_since = self._loop.time()  # the first bytes of the next request's head
        self._arm()

    def eof_received(self) -> bool | None:
        self._handler.eof_received()
        return None  # the transport closes itself; aiohttp's handler never keeps a half-closed connection

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport = None
        self._handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()

    # -- the deadlines -----------------------------------------------------------------------

    def _deadline(self) -> float | None:
        if self._handler._upgraded:
            return None
        if self._head_since is not None:
            return self._head_since + self._timeouts.header
        body = self._body
        if body is not None and not body.is_eof():
            return self._body_seen + self._timeouts.body
        return None

    def _arm(self) -> None:
        deadline = self._deadline()
        if deadline is None or (self._timer is not None and self._timer.when() <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(deadline, self._check)

    def _check(self) -> None:
        self._timer = None
        transport = self._transport
        if transport is None:
            return
        now = self._loop.time()
        if not transport.is_reading():
            # The proxy is not reading (its buffers are full): the client is not the one waiting.
            self._head_since = now if self._head_since is not None else None
            self._body_seen = now
        deadline = self._deadline()
        if deadline is None:
            return
        if now < deadline:
            self._arm()
            return
        what = "request head" if self._head_since is not None else "request body"
        log.debug("closing a connection: its %s did not arrive in time", what)
        self._handler.force_close()


class WatchedSite(web.TCPSite):
    """A TCP site whose every connection is watched (`Watchdog`)."""

    def __init__(
        self, runner: web.BaseRunner, host: str, port: int, timeouts: ClientTimeouts, reuse_port: bool = False
    ) -> None:
        super().__init__(runner, host, port, reuse_address=True, reuse_port=reuse_port)
        self._timeouts = timeouts
        self._reuse_port = reuse_port  # `serve --workers`: every worker binds the port (`serve.workers`)

    async def start(self) -> None:
        """What `TCPSite.start` does, with a watchdog around each connection's request handler."""
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        timeouts = self._timeouts

        def watched() -> Watchdog:
            return Watchdog(server(), timeouts, loop)

        self._server = await loop.create_server(
            watched, self._host, self._port, reuse_address=True, reuse_port=self._reuse_port or None
        )
