"""Client-chosen names in OpenTelemetry metric attributes and span names: printable, at most 200 characters,
and past 256 distinct values of a kind, `other`; tested with the attack that found it (1,000 distinct 20 KB
model names through the real proxy, exported to a collector on loopback)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from runguard.proxy.observe.telemetry.bounds import MAX_VALUE_CHARS, MAX_VALUES, OTHER, BoundedValues, bounded
from tests.e2e import payloads
from tests.support.otel import telemetry
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.upstream import FakeUpstream, Received, Reply

NAMES = 1_000
NAME_BYTES = 20_000


def test_a_value_is_printable_and_cut_to_its_length() -> None:
    assert bounded("gpt-4o\n\x1b[31m") == "gpt-4o\\x0a\\x1b[31m"
    assert len(bounded("m" * 20_000)) == MAX_VALUE_CHARS
    assert bounded("") == "unknown"


def test_past_the_cap_new_values_are_other_and_known_ones_stay() -> None:
    models = BoundedValues(max_values=2)
    assert [models(m) for m in ("a", "b", "c", "a", "b" + "x" * 300)] == ["a", "b", OTHER, "a", OTHER]


def _echo_model(request: Received) -> Reply:
    model = orjson.loads(request.body)["model"]
    return Reply.json(payloads.chat_completion(usage=(12, 5), model=model))


async def test_a_thousand_invented_20_kb_model_names_stay_bounded_in_metrics_and_span_names(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any]
) -> None:
    upstream.script = _echo_model
    url = await make_proxy(**telemetry(receiver.http_url))
    models = [f"{i:04d}-" + "m" * NAME_BYTES for i in range(NAMES)]
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer sk-otel-bounds"}) as session:

        async def send(i: int) -> None:
            body = {"model": models[i], "messages": [{"role": "user", "content": "hi"}]}
            run = {"X-Run-Id": f"otel-bounds-{i}"}  # a run each: no step cap in the way
            async with session.post(url + "/v1/chat/completions", json=body, headers=run) as response:
                assert response.status == 200

        for start in range(0, NAMES, 50):
            await asyncio.gather(*(send(i) for i in range(start, start + 50)))

    def all_counted(r: OtlpReceiver) -> bool:
        duration = r.metrics.get("gen_ai.client.operation.duration")
        return duration is not None and sum(p.count for p in duration.points) == NAMES

    await receiver.wait_for(all_counted, seconds=30)
    for name in ("gen_ai.client.operation.duration", "gen_ai.client.token.usage"):
        points = receiver.metrics[name].points
        requested = {p.attributes["gen_ai.request.model"] for p in points}
        answered = {p.attributes["gen_ai.response.model"] for p in points}
        for values in (requested, answered):
            assert len(values) == MAX_VALUES + 1 and OTHER in values
            assert max(len(v) for v in values) == MAX_VALUE_CHARS
    durations = receiver.metrics["gen_ai.client.operation.duration"].points
    others = [p for p in durations if p.attributes["gen_ai.request.model"] == OTHER]
    assert sum(p.count for p in others) == NAMES - MAX_VALUES
    await receiver.wait_for(lambda r: len(r.named("chat ")) > 0)
    spans = receiver.named("chat ")
    assert max(len(s.name) for s in spans) <= len("chat ") + MAX_VALUE_CHARS
    assert len({s.name for s in spans}) <= MAX_VALUES + 1
    assert max(len(s.attributes["gen_ai.request.model"]) for s in spans) == MAX_VALUE_CHARS
