"""What the orchestrator reads from a RunGuard proxy while a phase runs: its store's backlog, admin reads."""

from __future__ import annotations

import time
import urllib.request

from bench.procs import Service


def store_gauges(proxy: Service) -> dict[str, float]:
    """The record store's backlog and drops so far, from the proxy's metrics (empty when unreadable)."""
    wanted = {"runguard_store_backlog": "store_backlog", "runguard_store_dropped_total": "store_dropped"}
    try:
        with urllib.request.urlopen(proxy.url + "/runguard/metrics", timeout=10.0) as response:
            text = response.read().decode()
    except OSError:
        return {}
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            found[wanted[name]] = float(value)
    return found


def admin_reads(service: Service, load_seconds: float) -> list[float]:
    """Milliseconds of up to three `GET /runguard/runs` while the load runs (none: not a RunGuard proxy).

    The first starts once the load is past its warm-up; no read starts after 80% of the load's time.
    """
    started = time.monotonic()
    time.sleep(min(0.7, load_seconds / 3))
    times: list[float] = []
    while len(times) < 3 and time.monotonic() - started < 0.8 * load_seconds:
        sent = time.perf_counter()
        try:
            with urllib.request.urlopen(service.url + "/runguard/runs?limit=20", timeout=30.0) as response:
                response.read()
        except OSError:
            return []
        times.append((time.perf_counter() - sent) * 1000)
    return times


def drained(service: Service, timeout: float = 60.0) -> None:
    """Wait until the service's record store has nothing left to write (at once: no store, no metrics)."""
    deadline = time.monotonic() + timeout
    while store_gauges(service).get("store_backlog", 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
