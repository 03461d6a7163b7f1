"""`Calls`: a request's Redis commands on connections of their own, with the client's guarantees (at most
`limit` connections, each call within its timeout, a broken connection retried once, never a stale reply).

RedisState's behaviour over it (failures, restarts, lost replies) is in test_redis. Tests that kill
connections run a redis-server of their own; the rest use the shared one under keys of their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rexc

from runguard.proxy.state.redis_calls import Calls
from tests.services import require_redis, unique_name
from tests.support.redis_server import own_redis

pytestmark = pytest.mark.redis

TIMEOUT = 0.5


@asynccontextmanager
async def calls_on(url: str, limit: int = 4, seconds: float | None = TIMEOUT) -> AsyncIterator[Calls]:
    client = aioredis.from_url(url, socket_timeout=seconds)
    calls = Calls(client.connection_pool, seconds, limit)
    try:
        yield calls
    finally:
        await calls.close()
        await client.aclose()


async def connected_clients(url: str) -> int:
    """Clients connected to the server, the one asking not counted."""
    client = aioredis.from_url(url)
    try:
        return int((await client.info("clients"))["connected_clients"]) - 1
    finally:
        await client.aclose()


async def test_commands_answer_as_redis_does_on_one_reused_connection() -> None:
    async with own_redis() as server, calls_on(server.url) as calls:
        assert await calls.send("SET", "k", "v", "PX", 60_000) == b"OK"
        assert await calls.send("SET", "k", "w", "PX", 60_000, "NX") is None
        assert await calls.send("GET", "k") == b"v"
        assert await calls.send("GET", "absent") is None
        assert await calls.send("EVAL", "return {KEYS[1], ARGV[1], false}", 1, "a", b"b") == [b"a", b"b", None]
        assert await connected_clients(server.url) == 1


async def test_an_error_reply_raises_and_the_connection_stays_in_step() -> None:
    async with own_redis() as server, calls_on(server.url) as calls:
        await calls.send("SET", "k", "v")
        with pytest.raises(rexc.ResponseError, match="WRONGTYPE"):
            await calls.send("HGET", "k", "f")
        with pytest.raises(rexc.NoScriptError):
            await calls.send("EVALSHA", "0" * 40, 0)
        assert await calls.send("GET", "k") == b"v"
        assert await connected_clients(server.url) == 1


async def test_no_more_connections_than_the_limit_and_a_wait_for_one_is_bounded() -> None:
    async with own_redis() as server, calls_on(server.url, limit=2) as calls:
        # Four calls blocked in the server at once: two run, two wait for a connection.
        blocked = [asyncio.create_task(calls.send("BLPOP", f"list-{n}", 0.3)) for n in range(4)]
        await asyncio.sleep(0.1)
        assert await connected_clients(server.url) == 2
        assert await asyncio.gather(*blocked) == [None] * 4
        assert await connected_clients(server.url) == 2
    async with own_redis() as server, calls_on(server.url, limit=1, seconds=0.2) as calls:
        await calls._free.acquire()  # the one connection busy (a call holds it at most its own timeout)
        started = time.monotonic()
        with pytest.raises(rexc.ConnectionError, match="No connection available"):
            await calls.send("GET", "k")
        assert 0.18 <= time.monotonic() - started < 0.4
        calls._free.release()
        assert await calls.send("GET", "k") is None


async def test_a_call_past_its_timeout_fails_and_its_connection_is_not_reused() -> None:
    async with own_redis() as server, calls_on(server.url, seconds=0.2) as calls:
        await calls.send("SET", "k", "v")
        started = time.monotonic()
        with pytest.raises(rexc.TimeoutError):
            await calls.send("BLPOP", "list", 1)  # the server answers after 1 s: too late
        assert 0.18 <= time.monotonic() - started < 0.5
        assert await calls.send("GET", "k") == b"v"  # not the BLPOP's late reply


async def test_a_cancelled_call_leaves_no_reply_behind() -> None:
    async with own_redis() as server, calls_on(server.url) as calls:
        await calls.send("SET", "k", "v")
        waiting = asyncio.create_task(calls.send("BLPOP", "list", 0.2))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0.25)  # the server has answered the BLPOP by now, on the dropped connection
        assert await calls.send("GET", "k") == b"v"


async def test_a_connection_the_server_closed_is_retried_once_at_once() -> None:
    async with own_redis() as server, calls_on(server.url) as calls:
        await calls.send("SET", "k", "v")
        admin = aioredis.from_url(server.url)
        try:
            await admin.client_kill_filter(_type="normal", skipme=True)
        finally:
            await admin.aclose()
        assert await calls.send("GET", "k") == b"v"
        await server.stop()
        started = time.monotonic()
        with pytest.raises(rexc.ConnectionError):
            await calls.send("GET", "k")
        assert time.monotonic() - started < 2 * TIMEOUT
        await server.start()
        assert await calls.send("SET", "k", "w") == b"OK"


async def test_closing_closes_its_connections() -> None:
    url = require_redis()
    key = unique_name("rgtest_calls")
    async with calls_on(url) as calls:
        await asyncio.gather(*(calls.send("SET", key, "v", "PX", 10_000) for _ in range(3)))
        conns = list(calls._open)
        assert conns and all(conn.is_connected for conn in conns)
        await calls.close()
        assert not any(conn.is_connected for conn in conns)
