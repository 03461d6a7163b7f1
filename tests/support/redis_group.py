"""Redis servers of a test's own, started from the `redis-server` binary on free loopback ports:
one with persistence (to restart with its data), or a primary, a replica and three Sentinels (to fail
over). Each lives in a temp dir of the test's; only the processes started here are killed."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import redis.asyncio as aioredis

from tests.services import require_binary
from tests.support.redis_server import answering, free_port, killed

SERVICE = "rgmaster"


class RedisProcess:
    """One `redis-server` (or Sentinel) with a config file of its own in `directory`."""

    def __init__(self, directory: Path, lines: Sequence[str], sentinel: bool = False) -> None:
        self.port = free_port()
        self.directory = directory
        self.sentinel = sentinel
        directory.mkdir(parents=True, exist_ok=True)
        self.config = directory / ("sentinel.conf" if sentinel else "redis.conf")
        head = [f"port {self.port}", "bind 127.0.0.1", f'dir "{directory}"', "protected-mode no"]
        self.config.write_text("\n".join([*head, *lines]) + "\n")  # a Sentinel rewrites its own file
        self._process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        binary = require_binary("redis-server", "redis-server")
        args = [str(self.config), *(["--sentinel"] if self.sentinel else [])]
        self._process = await asyncio.create_subprocess_exec(
            binary, *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        await answering(self.url, self.port)

    async def kill(self) -> None:
        await killed(self._process)
        self._process = None

    def signal(self, sig: int) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.send_signal(sig)

    async def stop(self) -> None:
        """A clean stop (SIGTERM): a server with persistence writes its data first."""
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()
        self._process = None


@asynccontextmanager
async def persistent_redis(directory: Path) -> AsyncIterator[RedisProcess]:
    """A redis-server that appends every write to its file (`appendfsync always`): restarted, it has them all."""
    server = RedisProcess(directory, ["appendonly yes", "appendfsync always", 'save ""'])
    await server.start()
    try:
        yield server
    finally:
        await server.kill()


class SentinelGroup:
    """A primary, its replica and three Sentinels watching them (quorum 2, down after 400 ms)."""

    def __init__(self, directory: Path) -> None:
        self.primary = RedisProcess(directory / "primary", ['save ""', "appendonly no"])
        self.replica = RedisProcess(
            directory / "replica", ['save ""', "appendonly no", f"replicaof 127.0.0.1 {self.primary.port}"]
        )
        watch = [
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2",
            f"sentinel down-after-milliseconds {SERVICE} 400",
            f"sentinel failover-timeout {SERVICE} 3000",
            f"sentinel parallel-syncs {SERVICE} 1",
        ]
        self.sentinels = [RedisProcess(directory / f"sentinel-{n}", watch, sentinel=True) for n in range(3)]

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{s.port}" for s in self.sentinels]

    async def start(self) -> None:
        await self.primary.start()
        await self.replica.start()
        await asyncio.gather(*(s.start() for s in self.sentinels))
        await self._until(lambda primary, replicas: primary == self.primary.port and replicas >= 1)

    async def primary_port(self) -> tuple[int, int]:
        """The primary's port as the first Sentinel that answers names it, and how many replicas it knows."""
        for sentinel in self.sentinels:
            client = aioredis.from_url(sentinel.url, decode_responses=True)
            try:
                masters = await client.sentinel_masters()
                info = masters.get(SERVICE)
                if info is not None:
                    return int(info["port"]), int(info.get("num-slaves", 0))
            except (aioredis.ConnectionError, OSError):
                continue
            finally:
                await client.aclose()
        return 0, 0

    async def _until(self, done: object, within: float = 15.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while loop.time() < deadline:
            if done(*await self.primary_port()):  # type: ignore[operator]
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("the Sentinels did not agree in time")

    def cut_replica(self) -> None:
        """Freeze the replica (SIGSTOP): writes from now on reach the primary alone."""
        self.replica.signal(signal.SIGSTOP)

    async def fail_over(self) -> None:
        """Kill the primary (and thaw the replica, if frozen: it never gets what the primary had since);
        return once the Sentinels name the replica primary."""
        old = self.primary.port
        await self.primary.kill()
        self.replica.signal(signal.SIGCONT)
        await self._until(lambda primary, _replicas: primary not in (0, old), within=20.0)

    async def stop(self) -> None:
        self.replica.signal(signal.SIGCONT)
        for process in (*self.sentinels, self.replica, self.primary):
            await process.kill()


@asynccontextmanager
async def sentinel_group(directory: Path) -> AsyncIterator[SentinelGroup]:
    group = SentinelGroup(directory)
    try:
        await group.start()
        yield group
    finally:
        await group.stop()
