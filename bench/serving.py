"""Running one bench server process: uvloop when available, a ready line on stdout, SIGTERM stops it.

The ready line is one JSON object, `{"ready": true, "port": N, "pid": P}`, so
the orchestrator learns the bound port (servers bind port 0 unless told).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from aiohttp import web


def run(main: Callable[[], Coroutine[Any, Any, None]], use_uvloop: bool = True) -> None:
    """Run `main` on uvloop (as `runguard-proxy serve` does) unless asked not to."""
    if use_uvloop:
        try:
            import uvloop

            uvloop.run(main())
            return
        except ImportError:
            pass
    asyncio.run(main())


async def serve(app: web.Application, host: str, port: int) -> None:
    """Serve `app` until SIGTERM or SIGINT; print the ready line once bound."""
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, auto_decompress=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, backlog=1024)
    await site.start()
    bound = port
    for address in runner.addresses:
        bound = int(address[1])
        break
    sys.stdout.write(orjson.dumps({"ready": True, "port": bound, "pid": os.getpid()}).decode() + "\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
