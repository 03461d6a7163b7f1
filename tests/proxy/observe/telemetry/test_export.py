"""Span export never makes a request wait: a bounded queue, drops counted."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry, generate_latest

from runguard.proxy.observe.telemetry.export import BoundedExport, SpanDrops


class Stuck(SpanExporter):
    """A collector that takes forever (until released), then answers `result`."""

    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS) -> None:
        self.release = threading.Event()
        self.result = result
        self.exported: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        self.exported += [s.name for s in spans]
        return self.result

    def shutdown(self) -> None:
        self.release.set()


def _provider(exporter: SpanExporter, drops: SpanDrops, limit: int) -> TracerProvider:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BoundedExport(exporter, drops, limit, timeout=1.0))
    return provider


def test_spans_past_the_queue_bound_are_dropped_and_counted_while_the_collector_hangs() -> None:
    drops, stuck = SpanDrops(), Stuck()
    provider = _provider(stuck, drops, limit=4)
    tracer = provider.get_tracer("t")
    for k in range(10):
        tracer.start_span(f"s{k}").end()  # returns at once although nothing is exported
    assert drops.queue_full == 6 and drops.pending == 4
    stuck.release.set()
    provider.force_flush()
    assert sorted(stuck.exported) == ["s0", "s1", "s2", "s3"]
    assert drops.pending == 0 and drops.export_failed == 0
    provider.shutdown()


def test_failed_exports_are_counted_and_shown_to_prometheus() -> None:
    drops, failing = SpanDrops(), Stuck(SpanExportResult.FAILURE)
    failing.release.set()
    provider = _provider(failing, drops, limit=100)
    for k in range(3):
        provider.get_tracer("t").start_span(f"s{k}").end()
    provider.force_flush()
    assert drops.export_failed == 3 and drops.pending == 0
    registry = CollectorRegistry()
    registry.register(drops)
    text = generate_latest(registry).decode()
    assert 'runguard_otel_spans_dropped_total{reason="export_failed"} 3.0' in text
    assert 'runguard_otel_spans_dropped_total{reason="queue_full"} 0.0' in text
    assert "runguard_otel_spans_queued 0.0" in text
    provider.shutdown()
