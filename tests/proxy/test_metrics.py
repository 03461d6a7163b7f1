"""Metrics: scraped from the real proxy after real SDK traffic; labels stay bounded and key-free."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runguard.detectors.base import Detector, DetectorConfig, RequestSeen, Results, RunFacts, Verdict
from runguard.detectors.max_requests import MaxRequests
from runguard.proxy.metrics import Metrics
from runguard.proxy.records import RequestRecord, TripRecord
from tests.e2e import payloads
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

KEY = "sk-test-abc"
RUN = "run-metrics-7f3a"


class Exploding(Detector[DetectorConfig]):
    name = "exploding"
    Config = DetectorConfig

    def check_request(self, seen: RequestSeen, facts: RunFacts, got: Results, cfg: DetectorConfig) -> Verdict | None:
        raise RuntimeError("detector bug")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url + "/runguard/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return await response.text()


def client(proxy_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key=KEY, max_retries=0, default_headers={"X-Run-Id": RUN})


async def test_counters_and_histograms_move_and_no_key_or_run_leaks(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("fine", usage=(12, 5)))
    settings = settings_for(upstream.url, guard={"detectors": {"max_requests": {"limit": 2}}})
    sink = ListSink()
    running = await start_proxy(settings, sink=sink, detectors=[MaxRequests(), Exploding()])
    sdk = client(running.url)
    try:
        for _ in range(2):
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.RateLimitError):
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        async with aiohttp.ClientSession() as session:
            broken = session.post(running.url + "/v1/chat/completions", data=b"{not json", headers={"X-Run-Id": RUN})
            async with broken as response:
                assert response.status == 200  # forwarded untouched (fail-open)
        text = await scrape(running.url)
    finally:
        await sdk.close()
        await running.stop()
    found = samples(text)
    assert value(found, "runguard_requests_total", provider="openai", api="chat", status="200") == 3
    assert value(found, "runguard_requests_total", provider="openai", api="chat", status="429") == 1
    assert value(found, "runguard_trips_total", detector="max_requests", action="block") == 1
    assert value(found, "runguard_blocked_requests_total", detector="max_requests") == 1
    assert value(found, "runguard_tokens_total", model="gpt-4o-mini", kind="input") == 24
    assert value(found, "runguard_tokens_total", model="gpt-4o-mini", kind="output") == 10
    assert value(found, "runguard_usd_total", model="gpt-4o-mini") > 0
    assert value(found, "runguard_upstream_latency_ms_count", provider="openai", api="chat") == 2
    assert value(found, "runguard_proxy_overhead_ms_count") == 3
    assert value(found, "runguard_detector_faults_total", detector="exploding", hook="check_request") >= 1
    assert value(found, "runguard_parse_errors_total", api="chat") == 1
    assert value(found, "runguard_in_flight_requests") == 0
    assert value(found, "runguard_state_degraded") == 0
    key_hash = sink.records[0].key_hash
    for secret in (KEY, key_hash, RUN, "fine"):
        assert secret not in text


async def test_in_flight_gauge_while_a_request_is_served(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply(200, orjson.dumps(payloads.chat_completion()), delay=0.5)
    running = await start_proxy(settings_for(upstream.url), detectors=[])
    sdk = client(running.url)
    try:
        messages: Any = [{"role": "user", "content": "x"}]
        pending = asyncio.ensure_future(sdk.chat.completions.create(model="gpt-4o-mini", messages=messages))
        for _ in range(100):
            if upstream.in_flight:
                break
            await asyncio.sleep(0.01)
        during = samples(await scrape(running.url))
        await pending
        after = samples(await scrape(running.url))
    finally:
        await sdk.close()
        await running.stop()
    assert value(during, "runguard_in_flight_requests") == 1
    assert value(after, "runguard_in_flight_requests") == 0


def record(model: str, **fields: Any) -> RequestRecord:
    base: dict[str, Any] = {
        "run_id": "r",
        "key_hash": "k_x",
        "index": 1,
        "at": 0.0,
        "agent": "a",
        "model": model,
        "provider": "openai",
        "api": "chat",
        "streamed": False,
        "status": 200,
        "input_tokens": 3,
    }
    return RequestRecord(**{**base, **fields})


def exposition(metrics: Metrics) -> str:
    return bytes(metrics.exposition().body).decode()  # type: ignore[arg-type]


def test_model_labels_are_bounded() -> None:
    metrics = Metrics(max_models=2)
    for i in range(6):
        metrics.request_done(record(f"invented-model-{i}"))
    metrics.request_done(record("invented-model-0"))
    found = samples(exposition(metrics))
    models = {dict(labels)["model"] for name, labels in found if name == "runguard_tokens_total"}
    assert models == {"invented-model-0", "invented-model-1", "other"}
    assert value(found, "runguard_tokens_total", model="other", kind="input") == 12
    assert value(found, "runguard_tokens_total", model="invented-model-0", kind="input") == 6


class QueueLike:
    backlog = 7

    def dropped(self) -> int:
        return 3


def test_store_backlog_and_drops_come_from_the_sink_when_it_has_them() -> None:
    metrics = Metrics()
    metrics.watch(QueueLike(), lambda: True)
    found = samples(exposition(metrics))
    assert value(found, "runguard_store_backlog") == 7
    assert value(found, "runguard_store_dropped_total") == 3
    assert value(found, "runguard_state_degraded") == 1
    bare = Metrics()
    bare.watch(object(), lambda: False)
    assert "runguard_store_backlog" not in exposition(bare)


def test_each_app_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.tripped(TripRecord("r", "k", "spiral", "block", "why", "run", 1, 0.0, 0.0, 0, 0.0))
    first.state_error()
    assert value(samples(exposition(first)), "runguard_trips_total", detector="spiral", action="block") == 1
    assert value(samples(exposition(second)), "runguard_trips_total", detector="spiral", action="block") == 0
    assert value(samples(exposition(first)), "runguard_state_errors_total") == 1


def test_unknown_paths_count_without_a_provider() -> None:
    metrics = Metrics()
    metrics._count("/favicon.ico", "404")
    metrics._count("/v1/embeddings", "200")
    found = samples(exposition(metrics))
    assert value(found, "runguard_requests_total", provider="none", api="none", status="404") == 1
    assert value(found, "runguard_requests_total", provider="openai", api="other", status="200") == 1
