"""A fake provider on loopback: records every request, answers from a script.

Tests script replies per request: a whole body, an SSE stream sent in chunks
(optionally with delays, or as a trickle of small pieces), a broken connection
mid-stream, a stream that goes silent, or a hang. The
script is a callable from the received request to a `Reply`, so a test can
drive an agent into any failure mode and count the upstream calls it cost.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import WSMsgType, web

from runguard.proxy.serve.server import Running, start


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    chunks: Sequence[bytes] | None = None  # a stream: written one by one
    delay: float = 0.0  # seconds before each chunk
    reset_after: int | None = None  # break the connection after this many chunks
    hang: bool = False  # never answer
    stall_after: int | None = None  # go silent (connection open) after this many chunks
    hold: asyncio.Event | None = None  # after the first chunk, wait for this before sending the rest

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        return cls(status, orjson.dumps(payload), {"Content-Type": "application/json", **(headers or {})})

    @classmethod
    def sse(cls, chunks: Sequence[bytes], **kwargs: Any) -> Reply:
        return cls(200, b"", {"Content-Type": "text/event-stream"}, chunks=chunks, **kwargs)


Script = Callable[[Received], Reply]
# A WebSocket's answers to one client message: messages to send back, and an int to close with that code.
SocketScript = Callable[[str | bytes], Sequence[str | bytes | int]]


def trickle(data: bytes, size: int = 7) -> list[bytes]:
    """`data` cut into pieces of `size` bytes (events split anywhere), for a slow trickle."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class FakeUpstream:
    def __init__(self, script: Script | None = None) -> None:
        self.received: list[Received] = []
        self.script: Script = script or (lambda _: Reply.json({"ok": True}))
        self.in_flight = 0
        self.max_in_flight = 0
        self.cancelled = 0
        self.socket_script: SocketScript = lambda message: [message]  # an echo
        self.socket_refusal: int | None = None  # answer WebSocket handshakes with this status instead
        self.handshakes: list[Received] = []
        self.socket_received: list[str | bytes] = []
        self._running: Running | None = None

    @property
    def url(self) -> str:
        assert self._running is not None
        return self._running.url

    async def start(self) -> FakeUpstream:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._running = await start(app, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self._running is not None:
            await self._running.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._socket(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:  # a request dropped while its body is still arriving counts as cancelled too
            body = await request.read()
            received = Received(request.method, request.path, request.query_string, dict(request.headers), body)
            self.received.append(received)
            return await self._answer(request, self.script(received))
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        """A WebSocket: each client message answered by `socket_script`; the first subprotocol offered taken."""
        self.handshakes.append(Received("GET", request.path, request.query_string, dict(request.headers), b""))
        if self.socket_refusal is not None:
            return web.Response(status=self.socket_refusal, text="refused")
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        socket = web.WebSocketResponse(protocols=offered[:1])
        await socket.prepare(request)
        async for message in socket:
            if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                break
            self.socket_received.append(message.data)
            for answer in self.socket_script(message.data):
                if isinstance(answer, int):
                    await socket.close(code=answer)
                elif isinstance(answer, bytes):
                    await socket.send_bytes(answer)
                else:
                    await socket.send_str(answer)
        return socket

    async def _answer(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        if reply.hang:
            await asyncio.sleep(3600)
        if reply.chunks is None:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            return web.Response(status=reply.status, body=reply.body, headers=reply.headers)
        out = web.StreamResponse(status=reply.status, headers=reply.headers)
        await out.prepare(request)
        for i, chunk in enumerate(reply.chunks):
            if reply.reset_after is not None and i >= reply.reset_after:
                assert request.transport is not None
                request.transport.abort()
                return out
            if reply.stall_after is not None and i >= reply.stall_after:
                await asyncio.sleep(3600)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if i == 1 and reply.hold is not None:
                await reply.hold.wait()
            await out.write(chunk)
        await out.write_eof()
        return out
