"""A TCP relay on a fixed loopback port that a test can take down and bring back, or hold: a database outage."""

from __future__ import annotations

import asyncio
import contextlib


class TcpRelay:
    def __init__(self, port: int, target_host: str, target_port: int) -> None:
        self.port = port
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    def retarget(self, host: str, port: int) -> None:
        """Pass new connections to another server (open ones stay where they are): a DNS name moved."""
        self._target = (host, port)

    def hold(self) -> None:
        """Stop passing bytes on, connections left open (a database that stopped answering)."""
        self._flowing.clear()

    def release(self) -> None:
        """Pass on what was held, and everything after it."""
        self._flowing.set()

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)

    async def down(self) -> None:
        """Refuse new connections and cut every open one (what a crashed database looks like)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
        self._writers.discard(writer)
