"""Metrics: scraped from the real proxy after real SDK traffic; labels stay bounded and key-free."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from runguard.detectors.max_requests import MaxRequests
from runguard.detectors.support.base import Detector, DetectorConfig, RequestSeen, Results, RunFacts, Verdict
from runguard.proxy.observe.metrics import (
    MAX_CACHED_PATHS,
    MAX_MODELS,
    OVERHEAD_BUCKETS_MS,
    TOKEN_KINDS,
    UPSTREAM_BUCKETS_MS,
    Metrics,
)
from runguard.proxy.store.records import RequestRecord, TripRecord
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
            headers = {"X-Run-Id": RUN, "Authorization": f"Bearer {KEY}"}  # the run is its key's (`tenants`)
            broken = session.post(running.url + "/v1/chat/completions", data=b"{not json", headers=headers)
            async with broken as response:
                assert response.status == 429  # unreadable, yet the run's: its open breaker refuses it
        text = await scrape(running.url)
    finally:
        await sdk.close()
        await running.stop()
    found = samples(text)
    assert value(found, "runguard_requests_total", provider="openai", api="chat", status="200") == 2
    assert value(found, "runguard_requests_total", provider="openai", api="chat", status="429") == 2
    assert value(found, "runguard_trips_total", detector="max_requests", action="block") == 1
    assert value(found, "runguard_blocked_requests_total", detector="max_requests") == 2
    assert value(found, "runguard_tokens_total", model="gpt-4o-mini", kind="input") == 24
    assert value(found, "runguard_tokens_total", model="gpt-4o-mini", kind="output") == 10
    assert value(found, "runguard_usd_total", model="gpt-4o-mini") > 0
    assert value(found, "runguard_upstream_latency_ms_count", provider="openai", api="chat") == 2
    assert value(found, "runguard_proxy_overhead_ms_count") == 4
    assert value(found, "runguard_detector_faults_total", detector="exploding", hook="check_request") >= 1
    assert value(found, "runguard_parse_errors_total", api="chat", body="request") == 1
    assert value(found, "runguard_unreadable_requests_total", provider="openai", action="blocked") == 1
    assert value(found, "runguard_in_flight_requests") == 0
    assert value(found, "runguard_state_degraded") == 0
    key_hash = sink.records[0].key_hash
    for secret in (KEY, key_hash, RUN, "fine"):
        assert secret not in text


async def test_an_answer_the_adapter_cannot_read_is_counted_unless_it_is_an_error_page(upstream: FakeUpstream) -> None:
    """A 200 in a shape no adapter knows means the provider's format moved; a 502 HTML page is just an error."""
    answers = iter(
        [Reply(200, b"<html>maintenance</html>", {"Content-Type": "application/json"}), Reply(502, b"<html>")]
    )
    upstream.script = lambda _: next(answers)
    running = await start_proxy(settings_for(upstream.url))
    try:
        async with aiohttp.ClientSession() as session:
            for status in (200, 502):
                body = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
                async with session.post(running.url + "/v1/chat/completions", data=body) as response:
                    assert response.status == status  # forwarded as they came
        found = samples(await scrape(running.url))
    finally:
        await running.stop()
    assert value(found, "runguard_parse_errors_total", api="chat", body="response") == 1
    assert value(found, "runguard_parse_errors_total", api="chat", body="request") == 0


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


async def test_an_open_websocket_is_counted_apart_from_the_requests_in_flight(upstream: FakeUpstream) -> None:
    """A Realtime socket lives for a whole voice session: it is an open socket, not a request in flight."""
    upstream.socket_script = lambda message: [message]
    running = await start_proxy(settings_for(upstream.url), detectors=[])
    try:
        async with aiohttp.ClientSession() as session:
            url = f"{running.url}/v1/realtime?model=gpt-realtime"
            async with session.ws_connect(url, headers={"Authorization": f"Bearer {KEY}"}) as socket:
                await socket.send_str('{"type": "session.update"}')
                assert await socket.receive_str() == '{"type": "session.update"}'
                during = samples(await scrape(running.url))
        for _ in range(100):  # the proxy's side of the socket closes after the client's
            after = samples(await scrape(running.url))
            if not value(after, "runguard_open_websockets"):
                break
            await asyncio.sleep(0.01)
    finally:
        await running.stop()
    assert (value(during, "runguard_open_websockets"), value(during, "runguard_in_flight_requests")) == (1, 0)
    assert (value(after, "runguard_open_websockets"), value(after, "runguard_in_flight_requests")) == (0, 0)


async def test_a_model_with_no_price_counts_unpriced_requests_and_gets_no_usd_series(upstream: FakeUpstream) -> None:
    upstream.script = lambda r: Reply.json(payloads.chat_completion(usage=(12, 5), model=r.json()["model"]))
    running = await start_proxy(settings_for(upstream.url), detectors=[])
    sdk = client(running.url)
    try:
        for model in ("acme-coder-9", "acme-coder-9", "gpt-4o-mini"):
            await sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        text = await scrape(running.url)
    finally:
        await sdk.close()
        await running.stop()
    found = samples(text)
    assert value(found, "runguard_unpriced_requests_total", model="acme-coder-9") == 2
    assert ("runguard_usd_total", (("model", "acme-coder-9"),)) not in found  # never $0: no series at all
    assert value(found, "runguard_tokens_total", model="acme-coder-9", kind="input") == 24
    assert value(found, "runguard_usd_total", model="gpt-4o-mini") > 0
    assert ("runguard_unpriced_requests_total", (("model", "gpt-4o-mini"),)) not in found


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
    busy_seconds = 1.5

    def dropped(self) -> int:
        return 3


def test_store_backlog_and_drops_come_from_the_sink_when_it_has_them() -> None:
    metrics = Metrics()
    metrics.watch(QueueLike(), lambda: True)
    found = samples(exposition(metrics))
    assert value(found, "runguard_store_backlog") == 7
    assert value(found, "runguard_store_dropped_total") == 3
    assert value(found, "runguard_state_degraded") == 1
    assert value(found, "runguard_stage_seconds_total", stage="records") == 1.5  # the writer's time
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


def family_samples(text: str, name: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) if family.name == name for s in family.samples]


def check_histogram(text: str, name: str, bounds: tuple[float, ...], **labels: str) -> tuple[float, float]:
    """Asserts one histogram child is well formed and consistent; returns its (count, sum)."""
    found = [s for s in family_samples(text, name) if {k: v for k, v in s.labels.items() if k != "le"} == labels]
    buckets = [(s.labels["le"], s.value) for s in found if s.name == name + "_bucket"]
    assert [le for le, _ in buckets] == [*(str(float(b)) for b in bounds), "+Inf"]
    cumulative = [n for _, n in buckets]
    assert cumulative == sorted(cumulative), "bucket counts must be cumulative"
    (count,) = (s.value for s in found if s.name == name + "_count")
    (total,) = (s.value for s in found if s.name == name + "_sum")
    assert cumulative[-1] == count
    # Every observation lies between its bucket's lower and upper bound, so the sum does too.
    per_bucket = [n - before for n, before in zip(cumulative, [0.0, *cumulative[:-1]], strict=True)]
    lows, highs = (0.0, *bounds), (*bounds, float("inf"))
    assert sum(n * low for n, low in zip(per_bucket, lows, strict=True)) <= total
    assert total <= sum(n * high for n, high in zip(per_bucket, highs, strict=True) if n)
    return count, total


async def test_a_scrape_after_n_requests_counts_each_one(upstream: FakeUpstream) -> None:
    reply = orjson.dumps(payloads.chat_completion(usage=(12, 5)))
    upstream.script = lambda _: Reply(200, reply, delay=0.03)  # every upstream latency is >= 30 ms
    running = await start_proxy(settings_for(upstream.url), detectors=[])
    sdk = client(running.url)
    n = 5
    try:
        for _ in range(n):
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        text = await scrape(running.url)
    finally:
        await sdk.close()
        await running.stop()
    found = samples(text)
    assert value(found, "runguard_requests_total", provider="openai", api="chat", status="200") == n
    assert {labels for name, labels in found if name == "runguard_requests_total"} == {
        (("api", "chat"), ("provider", "openai"), ("status", "200"))
    }
    tokens = {dict(labels)["kind"]: v for (name, labels), v in found.items() if name == "runguard_tokens_total"}
    assert tokens == {"input": 12 * n, "output": 5 * n, "cached": 0, "reasoning": 0}
    count, total = check_histogram(
        text, "runguard_upstream_latency_ms", UPSTREAM_BUCKETS_MS, provider="openai", api="chat"
    )
    assert count == n
    assert total >= 30 * n
    assert value(found, "runguard_upstream_latency_ms_bucket", provider="openai", api="chat", le="25.0") == 0
    count, _ = check_histogram(text, "runguard_proxy_overhead_ms", OVERHEAD_BUCKETS_MS)
    assert count == n
    assert value(found, "runguard_in_flight_requests") == 0
    assert not [name for name, _ in found if name.endswith("_created")]  # no per-series creation times
    # Seconds admitting and judging the five requests: more than nothing, less than the upstream's 150 ms.
    for stage in ("admission", "judging"):
        assert 0 < value(found, "runguard_stage_seconds_total", stage=stage) < 0.15


async def test_model_labels_past_the_cap_count_as_other_through_the_app(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion(usage=(12, 5)))
    running = await start_proxy(settings_for(upstream.url), detectors=[])
    models = [f"invented-{i}" for i in range(MAX_MODELS + 3)] + ["invented-0"]
    try:
        async with aiohttp.ClientSession(headers={"X-Run-Id": RUN, "Authorization": f"Bearer {KEY}"}) as session:
            for model in models:
                body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                async with session.post(running.url + "/v1/chat/completions", json=body) as response:
                    assert response.status == 200
        text = await scrape(running.url)
    finally:
        await running.stop()
    found = samples(text)
    usd_models = {dict(labels)["model"] for name, labels in found if name == "runguard_usd_total"}
    assert usd_models == {f"invented-{i}" for i in range(MAX_MODELS)} | {"other"}
    assert value(found, "runguard_tokens_total", model="other", kind="input") == 3 * 12
    assert value(found, "runguard_tokens_total", model="invented-0", kind="input") == 2 * 12
    requests = value(found, "runguard_requests_total", provider="openai", api="chat", status="200")
    assert requests == len(models)


def test_histograms_match_prometheus_clients_own() -> None:
    """Same bucket bounds, `le` spelling, cumulative counts, count and sum as a prometheus_client Histogram."""
    upstream = {
        ("openai", "chat"): [0.0, 9.99, 10, 10.000001, 25, 420.5, 1000, 299_999.9, 300_000, 300_001, 1e9],
        ("anthropic", "messages"): [55.5, 2500, 2500.5],
    }
    overhead = [0.0, 0.05, 0.1, 0.1000001, 0.25, 0.61, 1, 999.9, 1000, 1000.1, 5000, 0.3, 2.5, 7.0]
    reference = CollectorRegistry()
    ref_upstream = Histogram(
        "runguard_upstream_latency_ms",
        "Upstream time per request in ms (streams: until the last byte).",
        ["provider", "api"],
        buckets=UPSTREAM_BUCKETS_MS,
        registry=reference,
    )
    ref_overhead = Histogram(
        "runguard_proxy_overhead_ms",
        "Time spent in the proxy per request, in ms.",
        buckets=OVERHEAD_BUCKETS_MS,
        registry=reference,
    )
    metrics = Metrics()
    i = 0
    for (provider, api), latencies in upstream.items():
        for latency in latencies:
            metrics.request_done(record("m", provider=provider, api=api, upstream_ms=latency, overhead_ms=overhead[i]))
            ref_upstream.labels(provider, api).observe(latency)
            ref_overhead.observe(overhead[i])
            i += 1
    expected = generate_latest(reference).decode()
    got = exposition(metrics)
    for name in ("runguard_upstream_latency_ms", "runguard_proxy_overhead_ms"):

        def lines(text: str, name: str = name) -> list[str]:
            return [line for line in text.splitlines() if name in line and "_created" not in line]

        assert lines(got) == lines(expected)
        assert lines(got)  # the family is there at all


def test_path_cache_is_bounded_and_counts_stay_exact() -> None:
    metrics = Metrics()
    for i in range(MAX_CACHED_PATHS + 50):
        metrics._count(f"/probe/{i}", "404")
    metrics._count("/v1/chat/completions", "200")
    metrics._count("/v1/chat/completions", "200")
    assert len(metrics._path_labels) == MAX_CACHED_PATHS
    found = samples(exposition(metrics))
    assert value(found, "runguard_requests_total", provider="none", api="none", status="404") == MAX_CACHED_PATHS + 50
    assert value(found, "runguard_requests_total", provider="openai", api="chat", status="200") == 2


def test_a_fresh_app_exposes_every_unlabelled_series_at_zero() -> None:
    buckets = [*(str(float(b)) for b in OVERHEAD_BUCKETS_MS), "+Inf"]
    expected: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {
        ("runguard_proxy_overhead_ms_bucket", (("le", le),)): 0.0 for le in buckets
    }
    assert samples(exposition(Metrics())) == {
        **expected,
        ("runguard_proxy_overhead_ms_count", ()): 0.0,
        ("runguard_proxy_overhead_ms_sum", ()): 0.0,
        ("runguard_in_flight_requests", ()): 0.0,
        ("runguard_open_websockets", ()): 0.0,
        ("runguard_state_errors_total", ()): 0.0,
    }


def test_each_token_kind_counts_apart_and_negative_amounts_are_skipped() -> None:
    metrics = Metrics()
    metrics.request_done(record("gpt-4o", input_tokens=-5, output_tokens=7, usd=-1.0))
    metrics.request_done(record("gpt-4o", input_tokens=0, cached_tokens=2))
    metrics.request_done(record("gpt-4o", input_tokens=0, reasoning_tokens=4))
    found = samples(exposition(metrics))
    assert {k: value(found, "runguard_tokens_total", model="gpt-4o", kind=k) for k in TOKEN_KINDS} == {
        "input": 0,
        "output": 7,
        "cached": 2,
        "reasoning": 4,
    }
    assert ("runguard_usd_total", (("model", "gpt-4o"),)) in found
    assert value(found, "runguard_usd_total", model="gpt-4o") == 0
