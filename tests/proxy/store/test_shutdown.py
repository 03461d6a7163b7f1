"""SIGTERM under load: every request a client saw answered is in the store after the process exits.

A real `runguard-proxy serve` process writes to the store with a 30 s flush
interval, so (below the batch size) nothing is written while it runs: what is
in the database afterwards was flushed by the graceful shutdown.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

import httpx
import pytest

from runguard.proxy.store import StoreReader
from tests.e2e import payloads
from tests.support.processes import start_serve
from tests.support.upstream import FakeUpstream, Reply

pytestmark = pytest.mark.slow

CLIENTS = 12


async def test_sigterm_under_load_flushes_every_answered_request(
    store_url: str, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = lambda _: Reply(200, Reply.json(payloads.chat_completion("fine")).body, delay=0.05)
    env = {
        "RUNGUARD_OPENAI_UPSTREAM": upstream.url,
        "RUNGUARD_GEMINI_UPSTREAM": upstream.url,
        "RUNGUARD_DATABASE_URL": store_url,
        "RUNGUARD_STORE__FLUSH_INTERVAL": "30",
        "RUNGUARD_KEY_SALT": "shutdown-test",
        "RUNGUARD_HOME": str(tmp_path / "home"),
    }
    served = await start_serve(env, tmp_path)
    answered: Counter[str] = Counter()
    stop = asyncio.Event()
    loaded = asyncio.Event()  # set once more than 50 requests were answered

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
            i = 0
            while not stop.is_set():
                i += 1
                body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"client {n} says {i}"}]}
                headers = {"Authorization": "Bearer sk-shutdown-0123456789", "X-Run-Id": f"load-{n}"}
                try:
                    response = await http.post("/v1/chat/completions", json=body, headers=headers)
                except httpx.HTTPError:
                    return  # the proxy stopped accepting: this request was never answered
                if response.status_code == 200:
                    answered[f"load-{n}"] += 1
                    if sum(answered.values()) > 50:
                        loaded.set()

    clients = [asyncio.create_task(client(n)) for n in range(CLIENTS)]
    await asyncio.wait_for(loaded.wait(), 30)  # under load when the signal comes, however slow the machine
    code = await served.stop(signal.SIGTERM, wait_seconds=40)
    stop.set()
    await asyncio.gather(*clients)
    assert code == 0, served.diagnostics()

    reader = StoreReader.open(store_url)
    try:
        runs = {run["run_id"]: run for run in await reader.runs.recent(100)}
    finally:
        await reader.close()
    for run_id, count in answered.items():
        assert run_id in runs, f"{run_id}: {count} answered requests, none stored"
        assert runs[run_id]["requests"] >= count, (run_id, runs[run_id]["requests"], count)
    print(f"answered {sum(answered.values())}, stored {sum(run['requests'] for run in runs.values())}")
