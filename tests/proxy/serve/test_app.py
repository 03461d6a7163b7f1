"""The app `create_app` assembles: health, its state backend, several proxies in one process sharing
nothing, the detectors and observer it is given; and the store wired in: what real SDK traffic leaves in
the database and the admin API, flushed when the app stops."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from runguard.detectors.max_requests import MaxRequests
from runguard.proxy.core.ops import Scope
from runguard.proxy.serve.app import STATE, DiscardSink, build_state, create_app
from runguard.proxy.serve.server import start
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.state.redis import RedisState
from runguard.proxy.store import StoreReader
from runguard.proxy.store.records import RequestRecord
from tests.e2e import agents, payloads
from tests.e2e.faults import eventually
from tests.proxy.store import factory
from tests.services import require_redis, unique_name
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply


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
        detail = await factory.run_detail(reader.runs, "run-app-loop")
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
        run = await reader.runs.one("run-app-flush")
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


class Seen:
    """An observer that keeps the request records it is shown."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def request_done(self, record: RequestRecord) -> None:
        self.records.append(record)

    def tripped(self, trip: object) -> None:
        pass

    def detector_fault(self, detector: str, hook: str) -> None:
        pass

    def state_error(self) -> None:
        pass

    def parse_error(self, api: str, body: str = "request") -> None:
        pass

    def unreadable(self, provider: str, action: str) -> None:
        pass


async def test_health_answers_with_the_state_backend_in_use(upstream: FakeUpstream) -> None:
    running = await start_proxy(settings_for(upstream.url))
    try:
        async with httpx.AsyncClient(base_url=running.url) as client:
            answer = await client.get("/runguard/health")
        entries = {"entries": 0, "kept": 0, "evicted": 0, "evicted_in_tenant": 0, "refused_runs": 0}
        assert (answer.status_code, answer.json()) == (200, {"status": "ok", "state": "memory", "entries": entries})
    finally:
        await running.stop()


async def test_the_state_is_in_memory_unless_a_redis_url_is_set() -> None:
    memory = build_state(settings_for("http://127.0.0.1:9", runs={"max_runs": 10}))
    assert isinstance(memory, MemoryState) and memory.never_waits
    await memory.close()
    url = require_redis()
    prefix = unique_name("rgtest_app")
    shared = build_state(settings_for("http://127.0.0.1:9", state={"url": url, "key_prefix": prefix}))
    try:
        assert isinstance(shared, RedisState) and await shared.ping()
        assert shared.key(Scope.RUN, "r").startswith(f"{prefix}:")
    finally:
        await shared.close()


async def test_two_proxies_in_one_process_share_no_state(upstream: FakeUpstream, sink: ListSink) -> None:
    """Nothing is module-global: a run stopped on one proxy is a fresh run on the other."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    capped = {"detectors": {"max_requests": {"limit": 2}}}
    first = await start_proxy(settings_for(upstream.url, guard=capped), sink=sink, detectors=[MaxRequests()])
    second = await start_proxy(settings_for(upstream.url, guard=capped), sink=sink, detectors=[MaxRequests()])
    try:
        ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        sdks = [_sdk(running.url, "shared-run") for running in (first, second)]
        for _ in range(2):
            await sdks[0].chat.completions.create(**ask)  # type: ignore[call-overload]
        with pytest.raises(openai.RateLimitError):
            await sdks[0].chat.completions.create(**ask)  # type: ignore[call-overload]
        assert (await sdks[1].chat.completions.create(**ask)).choices[0].message.content == "ok"  # type: ignore[call-overload]
        for sdk in sdks:
            await sdk.close()
        assert first.runner.app is not None and second.runner.app is not None
        assert first.runner.app[STATE] is not second.runner.app[STATE]
    finally:
        await first.stop()
        await second.stop()


async def test_the_given_detectors_and_observer_are_the_ones_used(upstream: FakeUpstream) -> None:
    """No detectors: a loop runs to its end; the observer sees every request."""
    upstream.script = agents.chat_script(steps=6)
    seen = Seen()
    app = create_app(settings_for(upstream.url), detectors=[], observer=seen, sink=DiscardSink())
    running = await start(app, "127.0.0.1", 0, grace=1.0)
    try:
        sdk = _sdk(running.url, "unguarded")
        assert await agents.chat_agent(sdk, agents.soft_error_tool) == "Done."  # no detector stopped it
        await sdk.close()
        await eventually(lambda: len(seen.records) == 7, within=10)
        assert {r.run_id for r in seen.records} == {"unguarded"} and not any(r.blocked_by for r in seen.records)
    finally:
        await running.stop()
