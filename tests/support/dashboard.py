"""A proxy with a record store that has served real traffic, for the dashboard's tests.

`serve_traffic` sends, with the openai SDK through the proxy to the fake
upstream: a healthy run that finishes (its repeated tool warns
`consecutive_same_tool`), a runaway stuck on a soft error (stopped by
`non_progress`), and a run whose id is an XSS attempt. It returns once the
store holds all three.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from runguard.proxy.serve.server import Running
from runguard.proxy.store import StoreReader
from tests.e2e import agents
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream

HEALTHY = "run-healthy-1"
RUNAWAY = "run-runaway-1"
XSS = '<script>alert("rg")</script><img src=x onerror=alert(1)>'
API_KEY = "sk-test-dashboard-0123456789"


def sdk(url: str, run_id: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, default_headers={"X-Run-Id": run_id}
    )


async def start_dashboard_proxy(upstream: FakeUpstream, store_url: str, **sections: dict[str, Any]) -> Running:
    """The real proxy with a store at `store_url`, bodies recorded unless a test says otherwise."""
    store = {"database_url": store_url, "flush_interval": 0.05, "record_bodies": True, **sections.pop("store", {})}
    return await start_proxy(settings_for(upstream.url, store=store, **sections))


async def serve_traffic(running: Running, upstream: FakeUpstream, store_url: str) -> None:
    """Healthy, runaway and XSS-named runs through the proxy; returns when the store holds them."""
    upstream.script = agents.chat_script(steps=4)
    for run_id in (HEALTHY, XSS):
        client = sdk(running.url, run_id)
        assert await agents.chat_agent(client, agents.progressing_tool) == "Done."
        await client.close()
    upstream.script = agents.chat_script(steps=50)
    client = sdk(running.url, RUNAWAY)
    try:
        await agents.chat_agent(client, agents.soft_error_tool)
        raise AssertionError("the runaway was not stopped")
    except openai.RateLimitError:
        pass
    finally:
        await client.close()
    reader = StoreReader.open(store_url)
    try:
        for _ in range(200):
            runs = {run["run_id"]: run for run in await reader.runs.recent(10)}
            if len(runs) == 3 and runs[RUNAWAY]["trips"] and runs[HEALTHY]["status"] == "completed":
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the store did not get the runs: {runs}")
    finally:
        await reader.close()
