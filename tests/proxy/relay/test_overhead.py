"""`x-runguard-overhead-ms`: RunGuard's own time on a request, on every guarded response, and its histogram."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import aiohttp
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runguard.detectors.max_requests import MaxRequests
from runguard.detectors.support.base import Detector, DetectorConfig, Plan, RequestSeen
from runguard.proxy.relay.overhead import HEADER
from tests.e2e import payloads
from tests.support.proxy import Running, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
SLOW_DETECTOR_S = 0.05
UPSTREAM_WAIT_S = 0.4


class Slow(Detector[DetectorConfig]):
    """A detector that takes `SLOW_DETECTOR_S` to plan: admission time the header must count."""

    name = "slow"
    Config = DetectorConfig

    def plan_request(self, seen: RequestSeen, cfg: DetectorConfig) -> Plan:
        time.sleep(SLOW_DETECTOR_S)
        return {}


@pytest.fixture
async def running(upstream: FakeUpstream) -> AsyncIterator[Running]:
    settings = settings_for(upstream.url, guard={"detectors": {"max_requests": {"limit": 2}}})
    proxy = await start_proxy(settings, detectors=[Slow(), MaxRequests()])
    yield proxy
    await proxy.stop()


def _client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-overhead", max_retries=0)


def _ms(headers: httpx.Headers) -> float:
    value = headers.get(HEADER)
    assert value is not None, f"no {HEADER}"
    return float(value)


async def test_a_whole_response_counts_admission_not_the_upstream_wait(
    upstream: FakeUpstream, running: Running
) -> None:
    upstream.script = lambda _: Reply(200, Reply.json(payloads.chat_completion("ok")).body, delay=UPSTREAM_WAIT_S)
    async with _client(running.url) as sdk:
        began = time.perf_counter()
        raw = await sdk.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
        took_ms = (time.perf_counter() - began) * 1000
    assert raw.parse().choices[0].message.content == "ok"
    overhead = _ms(raw.headers)
    assert took_ms >= UPSTREAM_WAIT_S * 1000
    # The slow detector's plan is in it; the upstream's 400 ms are not.
    assert SLOW_DETECTOR_S * 1000 <= overhead < UPSTREAM_WAIT_S * 1000


async def test_a_stream_carries_it_without_the_stream_s_duration(upstream: FakeUpstream, running: Running) -> None:
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("slow words"), delay=UPSTREAM_WAIT_S / 2)
    async with _client(running.url) as sdk:
        began = time.perf_counter()
        raw = await sdk.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
        text = "".join([chunk.choices[0].delta.content or "" async for chunk in raw.parse() if chunk.choices])
        took_ms = (time.perf_counter() - began) * 1000
    assert text == "slow words"
    overhead = _ms(raw.headers)
    assert took_ms >= UPSTREAM_WAIT_S * 1000
    assert SLOW_DETECTOR_S * 1000 <= overhead < UPSTREAM_WAIT_S * 1000


async def test_a_blocked_request_s_local_answer_carries_it(upstream: FakeUpstream, running: Running) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    async with _client(running.url) as sdk:
        headers = {"X-Run-Id": "run-overhead-cap"}
        for _ in range(2):
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, extra_headers=headers)
        with pytest.raises(openai.RateLimitError) as stopped:
            await sdk.chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=MESSAGES, extra_headers=headers
            )
    assert stopped.value.response.headers["x-runguard-trip"] == "max_requests"
    assert _ms(stopped.value.response.headers) >= SLOW_DETECTOR_S * 1000  # admission ran before the block


async def test_the_histogram_counts_each_stamped_response_by_provider_and_api(
    upstream: FakeUpstream, running: Running
) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    async with _client(running.url) as sdk:
        for i in range(3):
            await sdk.chat.completions.create(
                model="gpt-4o-mini", messages=MESSAGES, extra_headers={"X-Run-Id": f"run-h-{i}"}
            )
    async with aiohttp.ClientSession() as session, session.get(running.url + "/runguard/metrics") as response:
        text = await response.text()
    found = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("runguard_overhead_ms")
    }
    labels = (("api", "chat"), ("provider", "openai"))
    assert found[("runguard_overhead_ms_count", labels)] == 3
    assert found[("runguard_overhead_ms_sum", labels)] >= 3 * SLOW_DETECTOR_S * 1000
    assert found[("runguard_overhead_ms_bucket", (*labels[:1], ("le", "25.0"), *labels[1:]))] == 0  # 50 ms each


async def test_an_unguarded_relay_leaves_the_upstream_s_time_out_too(upstream: FakeUpstream, running: Running) -> None:
    upstream.script = lambda _: Reply(200, b'{"object":"list","data":[]}', delay=UPSTREAM_WAIT_S)
    async with _client(running.url) as sdk:
        raw = await sdk.models.with_raw_response.list()
    assert raw.parse().data == []
    assert _ms(raw.headers) < UPSTREAM_WAIT_S * 1000 / 2  # no detector runs for it: little of its own
