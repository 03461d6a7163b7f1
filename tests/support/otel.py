"""OpenTelemetry in tests: a proxy's telemetry settings for a loopback collector, and a run's trace id.

The collector itself is `tests.support.otlp_receiver`; `collecting()` runs one over HTTP and gRPC.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from runguard.proxy.observe.telemetry.ids import run_trace_id
from runguard.proxy.runs.keys import KeyHasher
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.proxy import TEST_SALT


@asynccontextmanager
async def collecting() -> AsyncIterator[OtlpReceiver]:
    """A collector on loopback taking OTLP over HTTP and gRPC; stopped after."""
    collector = OtlpReceiver()
    await collector.start_http()
    await collector.start_grpc()
    try:
        yield collector
    finally:
        await collector.stop()


def telemetry(endpoint: str, **more: Any) -> dict[str, Any]:
    """Export to `endpoint`, with metrics and idle agent turns flushed fast enough for a test."""
    quick = {"metric_interval_seconds": 0.2, "agent_turn_idle_seconds": 0.5, "export_timeout_seconds": 2}
    return {"telemetry": {"endpoint": endpoint, **quick, **more}}


def trace_of(run_id: str, key: str) -> str:
    """The hex trace id of a run's trace (the spans of a run without traceparent), sent with `key` to a
    proxy of `tests.support.proxy` (its tenant is the key's hash with that proxy's salt)."""
    return f"{run_trace_id(KeyHasher(TEST_SALT.encode()).hash(key), run_id):032x}"


def by_start(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return sorted(spans, key=lambda s: s.start_ns)
