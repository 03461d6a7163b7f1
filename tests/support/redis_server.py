"""A redis-server of a test's own: on a free port, without persistence, to kill and restart at will."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio as aioredis

from tests.services import require_binary


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def answering(url: str, port: int, tries: int = 250) -> None:
    """Returns once the redis-server at `url` answers a PING (every 20 ms, `tries` times); else raises."""
    client = aioredis.from_url(url)
    try:
        for _ in range(tries):
            try:
                if await client.ping():
                    return
            except (aioredis.ConnectionError, OSError):
                await asyncio.sleep(0.02)
    finally:
        await client.aclose()
    raise RuntimeError(f"redis-server did not answer on port {port}")


async def killed(process: asyncio.subprocess.Process | None) -> None:
    """`process` (one this test started) killed and waited for, if it still runs."""
    if process is not None and process.returncode is None:
        process.kill()
        await process.wait()


class OwnRedis:
    """A redis-server of the test's own on a free port, without persistence, so it can be killed and restarted."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        binary = require_binary("redis-server", "redis-server")
        self._process = await asyncio.create_subprocess_exec(
            binary,
            *("--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
            stdout=asyncio.subprocess.DEVNULL,
        )
        await answering(self.url, self.port, tries=200)

    async def stop(self) -> None:
        await killed(self._process)
        self._process = None


@asynccontextmanager
async def own_redis() -> AsyncIterator[OwnRedis]:
    server = OwnRedis()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
