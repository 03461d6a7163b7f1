"""Span export off the request path: a bounded queue in front of the SDK's `BatchSpanProcessor`, drops counted.

A finished span costs the request one counter check and a deque append; the
batch processor's worker thread encodes and sends batches. When the collector
is slow or gone, spans wait until `max_queue_size` are pending, and every span
beyond that is dropped at once (counted, `queue_full`), so a request never
waits on the collector. Batches the exporter fails to deliver (after its own
retries, within its timeout) are counted too (`export_failed`). The counts are
Prometheus metrics of the app (`runguard_otel_spans_dropped_total{reason}`,
`runguard_otel_spans_queued`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

BATCH_SIZE = 512
SCHEDULE_DELAY_MS = 1000


class SpanDrops:
    """Pending and dropped span counts, shared by the request path and the export thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pending = 0
        self.queue_full = 0
        self.export_failed = 0

    def take(self, limit: int) -> bool:
        """Whether one more span may wait for export (else it is counted as dropped)."""
        with self._lock:
            if self.pending >= limit:
                self.queue_full += 1
                return False
            self.pending += 1
            return True

    def settle(self, count: int, failed: bool) -> None:
        with self._lock:
            self.pending -= count
            if failed:
                self.export_failed += count

    def collect(self) -> Iterable[Metric]:
        """The Prometheus view (this object is registered as a collector of the app's registry)."""
        dropped = CounterMetricFamily(
            "runguard_otel_spans_dropped", "Spans not exported: queue full, or export failed.", labels=("reason",)
        )
        dropped.add_metric(("queue_full",), self.queue_full)
        dropped.add_metric(("export_failed",), self.export_failed)
        yield dropped
        yield GaugeMetricFamily("runguard_otel_spans_queued", "Spans waiting for export.", value=self.pending)


class _Settling(SpanExporter):
    """The real exporter, reporting each batch's end (and failure) to `SpanDrops`."""

    def __init__(self, inner: SpanExporter, drops: SpanDrops) -> None:
        self._inner = inner
        self._drops = drops

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        failed = True
        try:
            result = self._inner.export(spans)
            failed = result is not SpanExportResult.SUCCESS
            return result
        finally:
            self._drops.settle(len(spans), failed)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class BoundedExport(SpanProcessor):
    """`BatchSpanProcessor` with a queue bound that drops (and counts) instead of growing."""

    def __init__(self, exporter: SpanExporter, drops: SpanDrops, max_queue_size: int, timeout: float) -> None:
        self._drops = drops
        self._limit = max_queue_size
        # The inner queue holds at most what `drops` lets through, so it never drops on its own.
        self._batch = BatchSpanProcessor(
            _Settling(exporter, drops),
            max_queue_size=max_queue_size,
            max_export_batch_size=min(BATCH_SIZE, max_queue_size),
            schedule_delay_millis=SCHEDULE_DELAY_MS,
            export_timeout_millis=timeout * 1000,
        )

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass  # nothing to do until a span ends

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return  # the batch processor skips these: it would never settle them
        if self._drops.take(self._limit):
            self._batch.on_end(span)

    def shutdown(self) -> None:
        self._batch.shutdown()  # type: ignore[no-untyped-call]  # untyped in the SDK

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batch.force_flush(timeout_millis)
