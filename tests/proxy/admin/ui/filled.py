"""A dashboard over a store written directly (records as the guard emits them, no traffic needed), with the
proxy's state of the test's choosing: the page tests read what one page shows of known figures."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx

from runguard.proxy.serve.server import Running
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store import QueueSink
from runguard.proxy.store.records import Record
from tests.support.proxy import settings_for, start_proxy


async def fill(store_url: str, records: Sequence[Record]) -> None:
    """Write `records` to the store at `store_url` (created if need be)."""
    sink = QueueSink(store_url, flush_interval=0.02)
    sink.start()
    for record in records:
        sink.submit(record)
    await sink.flush()
    await sink.close()


@asynccontextmanager
async def dashboard(
    upstream_url: str, store_url: str, state: MemoryState | None = None, **sections: dict[str, Any]
) -> AsyncIterator[Running]:
    """The proxy with its store at `store_url` (and `state`, in-memory by default); stopped after."""
    store = {"database_url": store_url, **sections.pop("store", {})}
    running = await start_proxy(settings_for(upstream_url, store=store, **sections), state=state)
    try:
        yield running
    finally:
        await running.stop()


async def page(running: Running, path: str, **query: str) -> str:
    """The page at /runguard/ui/`path`, which must answer 200."""
    async with httpx.AsyncClient(base_url=running.url) as http:
        answer = await http.get(f"/runguard/ui/{path}", params=query)
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:500])
    return answer.text
