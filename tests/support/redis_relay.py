"""A TCP relay in front of a Redis server that can lose one reply or one command: a fault at the wrong moment."""

from __future__ import annotations

import asyncio


class LosingRelay:
    """A TCP relay in front of a Redis server that, once armed, drops what it carries next.

    `armed`: the next reply is dropped (the command reached the server and ran);
    `armed_command`: the next command is dropped (it never reaches the server).
    The client then sees its connection closed, as when a network path breaks;
    with `hold`, the connection stays open and the client waits out its timeout,
    as when the server or the path stalls.
    """

    def __init__(self, target: str, *, hold: bool = False) -> None:
        host, _, port = target.removeprefix("redis://").partition("/")[0].partition(":")
        self._target = (host, int(port))
        self.hold = hold
        self.armed = False
        self.armed_command = False
        self.lost = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"redis://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/0"

    async def __aenter__(self) -> LosingRelay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _drops(self, replies: bool) -> bool:
        if replies and self.armed:
            self.armed, self.lost = False, self.lost + 1
            return True
        if not replies and self.armed_command:
            self.armed_command, self.lost = False, self.lost + 1
            return True
        return False

    async def _relay(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection(*self._target)

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, replies: bool) -> None:
            while data := await source.read(65536):
                if self._drops(replies):
                    if self.hold:
                        continue
                    break
                sink.write(data)
                await sink.drain()
            client_out.close()
            server_out.close()

        for source, sink, replies in ((client_in, server_out, False), (server_in, client_out, True)):
            task = asyncio.ensure_future(pump(source, sink, replies))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
