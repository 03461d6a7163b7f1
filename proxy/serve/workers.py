"""`runguard-proxy serve --workers N`: N processes, one event loop each, on one port.

Python runs one event loop on one core at a time; a proxy whose work per
request is Python stops scaling at one core. N worker processes each bind the
same port with `SO_REUSEPORT`, and the kernel spreads incoming connections
over them (by a hash of each connection's addresses).

Run state must then be shared: a run's requests arrive on whatever connections
its client's pool opens, so the kernel sends them to any worker, and caps or
windows kept in one worker's memory would each see part of the run (a cap of
10 requests would let 10 per worker through). There is no run affinity at the
socket layer (the run id is in the HTTP headers, read after the kernel chose),
so `--workers` above 1 needs Redis state (`state.url`) and is refused without
it. What stays per worker: the conversation history cache (a miss reads the
request whole), `/runguard/metrics` (each scrape reads the worker that accepted
it: sum over workers, or scrape one worker each), and the record store's
writer (SQLite and PostgreSQL both take concurrent writers; migrations run
under a lock, `store.migrate`).

The parent process forks the workers before it starts any event loop or
thread, then only waits: on SIGTERM or SIGINT it passes SIGTERM to every
worker, which drains its requests as a single `serve` does, and exits when
they have; a worker that exits on its own stops the others (a supervisor
restarts the whole service, with every worker in the same configuration).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
from collections.abc import Callable
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

from runguard.config import Settings

STOP_MARGIN_SECONDS = 10.0  # past the shutdown grace period, a worker that has not exited is killed


class WorkersRefused(ValueError):
    """`--workers` cannot serve this configuration correctly."""


def check(settings: Settings, count: int) -> None:
    if count < 1:
        raise WorkersRefused("--workers must be at least 1")
    if count > 1 and not settings.state.shared:
        raise WorkersRefused(
            "--workers above 1 needs shared run state (state.url / RUNGUARD_STATE_URL, Redis): each worker "
            "would count only the requests the kernel hands it, so caps and detectors would see part of a run"
        )


def reserve_port(host: str, port: int) -> tuple[socket.socket, int]:
    """A socket bound to `host:port` with SO_REUSEPORT (not listening, so it is handed no connection): with
    port 0 it picks the port every worker then binds, and holding it keeps that port the group's."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    held = socket.socket(family, socket.SOCK_STREAM)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    held.bind((host, port))
    return held, int(held.getsockname()[1])


def serve_workers(settings: Settings, count: int, worker: Callable[[Settings], None]) -> int:
    """Run `worker(settings)` in `count` forked processes on one port (`settings.server.port`, or one port
    picked for all when it is 0) until a signal or a worker's exit; the exit code (0 when stopped)."""
    check(settings, count)
    held, port = reserve_port(settings.server.host, settings.server.port)
    settings = settings.model_copy(update={"server": settings.server.model_copy(update={"port": port})})
    stop_requested: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop_requested.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    context = multiprocessing.get_context("fork")
    workers: list[BaseProcess] = []
    try:
        for index in range(count):
            process = context.Process(target=_worker_main, args=(worker, settings), name=f"runguard-worker-{index}")
            process.start()
            workers.append(process)
        while not stop_requested and all(p.is_alive() for p in workers):
            wait([p.sentinel for p in workers], timeout=0.5)
        crashed = [p for p in workers if not p.is_alive() and p.exitcode != 0]
        _stop(workers, settings.server.shutdown_grace_seconds + STOP_MARGIN_SECONDS)
        return 0 if stop_requested and not crashed else 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        held.close()


def _worker_main(worker: Callable[[Settings], None], settings: Settings) -> None:
    # The parent's handlers (set before the fork) only record the signal: a worker's own loop sets its own.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    worker(settings)


def _stop(workers: list[BaseProcess], seconds: float) -> None:
    """SIGTERM to every live worker (each drains its requests), then wait; kill what outlives `seconds`."""
    for process in workers:
        if process.is_alive() and process.pid is not None:
            signal_process(process.pid, signal.SIGTERM)
    for process in workers:
        process.join(seconds)
        if process.is_alive():
            process.kill()
            process.join()


def signal_process(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        os.kill(pid, sig)
