"""Helpers for the hardening tests: a proxy with chosen settings, and polling for records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from runguard.proxy.store.records import RequestRecord, TripRecord
from tests.support.proxy import ListSink, settings_for, start_proxy


@asynccontextmanager
async def proxy(upstream_url: str, sink: ListSink | None = None, **sections: dict[str, Any]) -> AsyncIterator[str]:
    running = await start_proxy(settings_for(upstream_url, **sections), sink=sink)
    try:
        yield running.url
    finally:
        await running.stop()


def requests_of(sink: ListSink) -> list[RequestRecord]:
    return [r for r in sink.records if isinstance(r, RequestRecord)]


def trips_of(sink: ListSink) -> list[TripRecord]:
    return [r for r in sink.records if isinstance(r, TripRecord)]


async def eventually(check: Callable[[], bool], within: float = 1.5) -> None:
    """Wait until `check()` holds (records of abandoned requests are written in the background)."""
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)
