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
        client = aioredis.from_url(self.url)
        try:
            for _ in range(200):
                try:
                    if await client.ping():
                        return
                except (aioredis.ConnectionError, OSError):
                    await asyncio.sleep(0.02)
        finally:
            await client.aclose()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()
        self._process = None


@asynccontextmanager
async def own_redis() -> AsyncIterator[OwnRedis]:
    server = OwnRedis()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
