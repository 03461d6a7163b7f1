"""The commands a request sends to Redis (EVALSHA, GET, SET), on connections of their own.

redis-py's `Redis.execute_command` spends about 340k instructions of client
CPU on a one-key GET over loopback, more than the proxy spends on all of a
small request's detectors: its pool takes a condition, a lock and a timeout
per call and reads the socket to check it is clean, each write runs under
`asyncio.wait_for` (a task of its own), and every call, connection taken and
connection given back is reported to its observability hooks. `Calls` sends
the same command on the same kind of connection (redis-py's, with its hiredis
parser) from a plain stack of idle connections: about 145k instructions.

It keeps the client's guarantees: at most `limit` connections (a call waits
up to `timeout` for a free one, then fails as the pool does: `ConnectionError`),
each call bounded by `timeout` (connect, write and read together; then
`TimeoutError`), a broken connection retried once at once (`ConnectionError`:
a pooled socket the server closed on a restart). A connection is reused only
after a whole reply (or an error reply, which is one): one that failed in any
other way, a cancelled call's included, is closed and dropped, so an idle
connection never holds a stale reply.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis import exceptions as rexc
from redis.asyncio.connection import AbstractConnection, ConnectionPool

__all__ = ["Calls"]


class Calls:
    """Commands on up to `limit` connections made as `pool` makes them, each call within `timeout` seconds."""

    def __init__(self, pool: ConnectionPool, timeout: float | None, limit: int) -> None:
        # The call's own deadline bounds the socket: redis-py's per-write `wait_for` would cost a task a write.
        self._kwargs = {**pool.connection_kwargs, "socket_timeout": None}
        self._class = pool.connection_class
        self._timeout = timeout
        self._idle: list[AbstractConnection] = []
        self._open: set[AbstractConnection] = set()
        self._free = asyncio.Semaphore(limit)

    async def send(self, *args: str | bytes | int) -> Any:
        """The reply to one command; an error reply raises its `ResponseError`, a failure as redis-py would."""
        free = self._free
        if free.locked():  # all `limit` connections busy: wait for one, as the pool would, up to the timeout
            try:
                async with asyncio.timeout(self._timeout):
                    await free.acquire()
            except TimeoutError:
                raise rexc.ConnectionError("No connection available.") from None
        else:
            await free.acquire()  # answers at once
        try:
            conn = self._idle.pop() if self._idle else self._new()
            try:
                try:
                    reply = await self._attempt(conn, args)
                except rexc.ConnectionError:  # a broken connection (the server restarted): once more, at once
                    reply = await self._attempt(conn, args)
            except rexc.ResponseError:
                self._idle.append(conn)  # an answer: the connection is in step
                raise
            except BaseException:
                self._open.discard(conn)  # closed by `_attempt`
                raise
            self._idle.append(conn)
            return reply
        finally:
            free.release()

    def _new(self) -> AbstractConnection:
        conn = self._class(**self._kwargs)
        self._open.add(conn)
        return conn

    async def _attempt(self, conn: AbstractConnection, args: tuple[str | bytes | int, ...]) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                await conn.send_packed_command(conn.pack_command(*args), check_health=False)
                return await conn.read_response()
        except rexc.ResponseError:
            raise
        except TimeoutError:
            await conn.disconnect(nowait=True)
            raise rexc.TimeoutError(f"Timeout after {self._timeout} s") from None
        except BaseException:
            await conn.disconnect(nowait=True)  # an unread reply may follow: never reused as it is
            raise

    async def close(self) -> None:
        """Close every connection (idle ones, and any a cancelled call left)."""
        conns, self._idle = list(self._open), []
        self._open.clear()
        for conn in conns:
            await conn.disconnect(nowait=True)
