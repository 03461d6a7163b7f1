"""The store wired into the proxy: what real SDK traffic leaves in the database and the admin API."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from runguard.proxy.store import StoreReader
from tests.e2e import agents
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream


def _sdk(url: str, run_id: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"{url}/v1", api_key="sk-test-store-0123456789", max_retries=0, default_headers={"X-Run-Id": run_id}
    )


async def test_proxied_runs_land_in_the_store_and_the_admin_api(store_url: str, upstream: FakeUpstream) -> None:
    upstream.script = agents.chat_script(steps=6)
    settings = settings_for(upstream.url, store={"database_url": store_url, "flush_interval": 0.05})
    running = await start_proxy(settings)
    try:
        sdk = _sdk(running.url, "run-app-ok")
        assert await agents.chat_agent(sdk, agents.progressing_tool) == "Done."
        looping = _sdk(running.url, "run-app-loop")
        with pytest.raises(openai.RateLimitError):
            await agents.chat_agent(looping, agents.soft_error_tool)
        await sdk.close()
        await looping.close()
        async with httpx.AsyncClient(base_url=running.url) as admin:
            metrics = (await admin.get("/runguard/metrics")).text
            assert "runguard_store_backlog" in metrics and "runguard_store_dropped_total 0.0" in metrics
            for _ in range(100):  # the writer flushes every 50 ms
                runs = (await admin.get("/runguard/runs")).json()["runs"]
                if {r["run_id"] for r in runs} == {"run-app-ok", "run-app-loop"} and all(r["trips"] for r in runs[:1]):
                    break
            by_id = {r["run_id"]: r for r in runs}
            assert by_id["run-app-ok"]["status"] == "completed" and by_id["run-app-ok"]["requests"] == 7
            assert by_id["run-app-loop"]["status"].startswith("tripped:")
            detail = (await admin.get("/runguard/runs/run-app-ok")).json()
            assert [step["index"] for step in detail["timeline"]] == list(range(1, 8)) and detail["store"] is True
            trips = (await admin.get("/runguard/trips", params={"run_id": "run-app-loop"})).json()["trips"]
            assert trips and trips[0]["run_id"] == "run-app-loop"
    finally:
        await running.stop()
    reader = StoreReader.open(store_url)
    try:
        detail = await reader.run_detail("run-app-loop")
        assert detail is not None and "sk-test" not in str(detail)
        assert detail["run"]["input_tokens"] > 0 and detail["run"]["usd"] > 0
    finally:
        await reader.close()


async def test_every_record_is_flushed_when_the_app_stops(tmp_path: Path, upstream: FakeUpstream) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/flush.db"
    upstream.script = agents.chat_script(steps=3)
    settings = settings_for(upstream.url, store={"database_url": url, "flush_interval": 60.0})
    running = await start_proxy(settings)
    sdk = _sdk(running.url, "run-app-flush")
    await agents.chat_agent(sdk, agents.progressing_tool)
    await sdk.close()
    await running.stop()  # nothing was written yet (60 s interval): the shutdown must flush it
    reader = StoreReader.open(url)
    try:
        run = await reader.run("run-app-flush")
        assert run is not None and run["requests"] == 4 and run["status"] == "completed"
    finally:
        await reader.close()


async def test_no_database_url_means_no_store(upstream: FakeUpstream) -> None:
    running = await start_proxy(settings_for(upstream.url, store={"database_url": ""}))
    try:
        async with httpx.AsyncClient(base_url=running.url) as admin:
            assert (await admin.get("/runguard/runs")).status_code == 501
    finally:
        await running.stop()


class _DownReader:
    async def recent_runs(self, limit: int) -> list[dict[str, object]]:
        raise ConnectionRefusedError("database down")

    async def recent_trips(self, limit: int, run_id: str | None) -> list[dict[str, object]]:
        raise ConnectionRefusedError("database down")

    async def run_timeline(self, run_id: str) -> list[dict[str, object]] | None:
        raise ConnectionRefusedError("database down")

    async def run(self, run_id: str) -> dict[str, object] | None:
        raise ConnectionRefusedError("database down")


async def test_admin_answers_503_while_the_store_is_down(upstream: FakeUpstream) -> None:
    from runguard.proxy.admin.api import STORE_READER
    from runguard.proxy.serve.app import create_app
    from runguard.proxy.serve.server import start

    app = create_app(settings_for(upstream.url, store={"database_url": ""}), detectors=[])
    app[STORE_READER] = _DownReader()
    running = await start(app, "127.0.0.1", 0, grace=1.0)
    try:
        async with httpx.AsyncClient(base_url=running.url) as admin:
            for path in ("/runguard/runs", "/runguard/trips", "/runguard/runs/r1"):
                response = await admin.get(path)
                assert response.status_code == 503 and "record store is unavailable" in response.json()["error"]
    finally:
        await running.stop()
