"""Running an app on a socket, the same way for the CLI and the tests.

The runner cancels a handler when its client disconnects (so an abandoned
stream stops the upstream request), leaves request bodies compressed as sent
(the proxy forwards bytes untouched), closes connections whose clients are too
slow or idle too long (`timeouts`), and on shutdown waits for in-flight
streams for the part of the grace period that is theirs (`shutdown`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from runguard.proxy.http.errors import ProxyRunner
from runguard.proxy.relay import handlers_wait
from runguard.proxy.serve.timeouts import ClientTimeouts, WatchedSite


@dataclass(slots=True)
class Running:
    runner: web.AppRunner
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start(
    app: web.Application,
    host: str,
    port: int,
    grace: float = 30.0,
    timeouts: ClientTimeouts | None = None,
    reuse_port: bool = False,
) -> Running:
    """Serve `app` on `host:port`; `timeouts` bound slow and idle clients (`runguard.proxy.serve.timeouts`);
    `reuse_port`: share the port with other processes (`serve.workers`)."""
    bounds = timeouts or ClientTimeouts()
    runner = ProxyRunner(  # an AppRunner that never echoes a request it cannot parse (keys in it)
        app,
        handler_cancellation=True,
        auto_decompress=False,
        access_log=None,
        shutdown_timeout=handlers_wait(grace),  # past the streams' cut, within the grace (see `shutdown`)
        keepalive_timeout=bounds.keepalive,
    )
    await runner.setup()
    site = WatchedSite(runner, host, port, bounds, reuse_port)
    await site.start()
    bound = port
    for address in runner.addresses:  # the real port when 0 asked for a free one
        bound = int(address[1])
        break
    return Running(runner, host, bound)
