"""`timeouts`: what the watchdog must leave alone (the attacks themselves: tests/e2e/test_slow_clients.py)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from runguard.config.settings import ServerSettings
from runguard.proxy.serve.server import start
from runguard.proxy.serve.timeouts import ClientTimeouts

SHORT = ClientTimeouts(header=0.3, body=0.3, keepalive=0.3)


def test_the_defaults_are_the_settings_defaults() -> None:
    assert ClientTimeouts.of(ServerSettings()) == ClientTimeouts()
    tuned = ServerSettings(header_timeout=5, body_timeout=6, keepalive_timeout=7)
    assert ClientTimeouts.of(tuned) == ClientTimeouts(5, 6, 7)


async def _echo_socket(request: web.Request) -> web.StreamResponse:
    socket = web.WebSocketResponse()
    await socket.prepare(request)
    async for message in socket:
        await socket.send_str(message.data)
    return socket


async def _slow_reader(request: web.Request) -> web.Response:
    await asyncio.sleep(1.0)  # the body waits for the handler: the proxy, not the client, is slow
    return web.Response(text=str(len(await request.read())))


async def test_a_quiet_websocket_and_a_body_the_handler_reads_late_are_not_cut() -> None:
    app = web.Application(client_max_size=1 << 24)
    app.router.add_get("/socket", _echo_socket)
    app.router.add_post("/late", _slow_reader)
    running = await start(app, "127.0.0.1", 0, grace=1.0, timeouts=SHORT)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(running.url + "/socket") as socket:
                for _ in range(2):
                    await asyncio.sleep(1.0)  # quiet for three times every deadline, after a message too
                    await socket.send_str("still here")
                    assert (await socket.receive(timeout=2)).data == "still here"
            body = b"x" * (8 << 20)  # far more than the server buffers before it stops reading
            async with session.post(running.url + "/late", data=body) as answer:
                assert (answer.status, await answer.text()) == (200, str(len(body)))
    finally:
        await running.stop()
