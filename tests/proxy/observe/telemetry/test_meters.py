"""The GenAI client metrics: `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`, histograms
with the conventions' names, units, buckets and attributes; tokens only when a response reported usage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from runguard.proxy.observe.telemetry.meters import DURATION_BUCKETS, TOKEN_BUCKETS, GenAiMeters
from tests.e2e import agents as loops
from tests.support.otel import telemetry
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.upstream import FakeUpstream

ATTRIBUTES = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m"}


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def _meters() -> tuple[GenAiMeters, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    return GenAiMeters(provider.get_meter("test")), reader


def test_a_request_with_usage_records_input_and_output_tokens_and_its_duration() -> None:
    meters, reader = _meters()
    meters.record(ATTRIBUTES, 1200, 80, 0.5, None)
    points = _points(reader)
    tokens = {p.attributes["gen_ai.token.type"]: p for p in points["gen_ai.client.token.usage"]}
    assert (tokens["input"].sum, tokens["output"].sum) == (1200, 80)
    assert tuple(tokens["input"].explicit_bounds) == tuple(float(b) for b in TOKEN_BUCKETS)
    assert tokens["input"].attributes["gen_ai.request.model"] == "m"
    (duration,) = points["gen_ai.client.operation.duration"]
    assert (duration.count, duration.sum) == (1, 0.5) and tuple(duration.explicit_bounds) == DURATION_BUCKETS
    assert "error.type" not in duration.attributes


def test_a_request_without_usage_records_its_duration_only_with_its_error() -> None:
    meters, reader = _meters()
    meters.record(ATTRIBUTES, 0, 0, 2.0, "runguard.blocked")
    points = _points(reader)
    assert "gen_ai.client.token.usage" not in points
    (duration,) = points["gen_ai.client.operation.duration"]
    assert duration.attributes["error.type"] == "runguard.blocked"


async def test_genai_metrics_are_histograms_with_the_conventions_buckets(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    upstream.script = loops.chat_script(steps=1)
    url = await make_proxy(**telemetry(receiver.http_url))
    await loops.chat_agent(sdk_client(url, "sk-otel-metrics", {"X-Run-Id": "otel-metrics"}), loops.progressing_tool)

    def counted(r: OtlpReceiver) -> bool:
        usage = r.metrics.get("gen_ai.client.token.usage")
        return usage is not None and sum(p.count for p in usage.points) == 4  # 2 requests x input, output

    await receiver.wait_for(counted)
    usage = receiver.metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    kinds = {p.attributes["gen_ai.token.type"]: p for p in usage.points}
    assert kinds["input"].total == 100 and kinds["output"].total == 20
    assert kinds["input"].bounds == tuple(float(b) for b in TOKEN_BUCKETS)
    assert kinds["input"].attributes["gen_ai.operation.name"] == "chat"
    assert kinds["input"].attributes["gen_ai.provider.name"] == "openai"
    assert kinds["input"].attributes["gen_ai.request.model"] == "gpt-4o-mini"
    duration = receiver.metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s" and sum(p.count for p in duration.points) == 2
    assert duration.points[0].bounds == DURATION_BUCKETS
