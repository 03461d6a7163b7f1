"""OpenTelemetry for one app: its own tracer and meter providers, exporters, and their lifetime.

Nothing here is global: no `trace.set_tracer_provider`, so several proxies in
one process (tests, benches) export apart, and an agent framework's own
OpenTelemetry setup in the same process is left alone. `install` is called by
`create_app`; it does nothing when export is off (`config.resolve`), and the
SDK is imported only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web
from prometheus_client import CollectorRegistry

from runguard.config import Settings
from runguard.proxy.observe.telemetry.config import GRPC, ExportConfig, resolve
from runguard.proxy.providers import registry as provider_specs

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace.export import SpanExporter

    from runguard.detectors.support import ResponseSeen
    from runguard.proxy.guard import Ticket
    from runguard.proxy.store.records import RequestRecord

    RequestHook = Callable[[Ticket, ResponseSeen | None, RequestRecord], None]

log = logging.getLogger("runguard.telemetry")
SWEEP_SECONDS = 1.0  # how often agent turns silent for their idle time are ended


def _span_exporter(config: ExportConfig) -> SpanExporter:
    endpoint, timeout, headers = config.traces_endpoint, config.export_timeout, dict(config.headers)
    if config.protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        return GrpcSpans(endpoint=endpoint, insecure=config.insecure, headers=headers, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

    return HttpSpans(endpoint=endpoint, headers=headers, timeout=timeout)


def _metric_exporter(config: ExportConfig) -> MetricExporter:
    endpoint, timeout, headers = config.metrics_endpoint, config.export_timeout, dict(config.headers)
    if config.protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics

        return GrpcMetrics(endpoint=endpoint, insecure=config.insecure, headers=headers, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics

    return HttpMetrics(endpoint=endpoint, headers=headers, timeout=timeout)


def _server(url: str) -> tuple[str, int]:
    """An upstream base URL's host and port (`server.address`, `server.port` of the chat spans)."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


class Telemetry:
    """The providers of one app and the tracer the guard reports requests to."""

    def __init__(
        self, config: ExportConfig, registry: CollectorRegistry, servers: Mapping[str, tuple[str, int]]
    ) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        from runguard.proxy.observe.telemetry.export import BoundedExport, SpanDrops
        from runguard.proxy.observe.telemetry.ids import RunTraceIds
        from runguard.proxy.observe.telemetry.meters import GenAiMeters
        from runguard.proxy.observe.telemetry.spans import GenAiTracer

        self.config = config
        resource = Resource.create({"service.name": config.service_name})
        ids = RunTraceIds()
        self.drops = SpanDrops()
        registry.register(self.drops)
        self._traces: TracerProvider | None = None
        self._metrics: MeterProvider | None = None
        tracer, meters = None, None
        if config.traces_endpoint:
            spans = _span_exporter(config)
            self._traces = TracerProvider(resource=resource, id_generator=ids, shutdown_on_exit=False)
            self._traces.add_span_processor(
                BoundedExport(spans, self.drops, config.max_queue_size, config.export_timeout)
            )
            tracer = self._traces.get_tracer("runguard.proxy")
        if config.metrics_endpoint:
            exporter = _metric_exporter(config)
            reader = PeriodicExportingMetricReader(
                exporter,
                export_interval_millis=config.metric_interval * 1000,
                export_timeout_millis=config.export_timeout * 1000,
            )
            self._metrics = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
            meters = GenAiMeters(self._metrics.get_meter("runguard.proxy"))
        self.tracer = GenAiTracer(
            tracer,
            ids,
            meters,
            capture_content=config.capture_content,
            turn_idle=config.turn_idle,
            servers=servers,
        )

    async def lifetime(self, _app: web.Application) -> AsyncIterator[None]:
        """Ends idle agent turns while the app runs; at cleanup ends the rest, then flushes and shuts the
        providers down (`shut_down`)."""
        sweeper = asyncio.create_task(self._sweep())
        yield
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
        self.tracer.turns.close()
        await self.shut_down()

    async def shut_down(self) -> None:
        """Flush what is queued and stop the exporters, waiting at most the export timeout.

        The SDK's shutdown blocks while an export is under way, and against a
        collector that never answers that is one export timeout per batch and
        signal. It runs on a daemon thread: past the timeout the proxy stops
        without the spans still queued (a warning says so), and the thread
        does not hold the process's exit.
        """
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def run() -> None:
            try:
                self.shutdown()
            except Exception:
                log.exception("OpenTelemetry shutdown failed")
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone already
                    loop.call_soon_threadsafe(done.set)

        threading.Thread(target=run, name="runguard-otel-shutdown", daemon=True).start()
        try:
            await asyncio.wait_for(done.wait(), self.config.export_timeout)
        except TimeoutError:
            log.warning(
                "OpenTelemetry: the collector took no export for %.0f s; stopping without %d queued spans",
                self.config.export_timeout,
                self.drops.pending,
            )

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                self.tracer.turns.sweep(time.time_ns())
            except Exception:  # a span that cannot end must not stop the next sweeps
                log.exception("ending idle agent turns failed")

    def shutdown(self) -> None:
        if self._traces is not None:
            self._traces.shutdown()
        if self._metrics is not None:
            self._metrics.shutdown(timeout_millis=self.config.export_timeout * 1000)


def install(
    app: web.Application, settings: Settings, registry: CollectorRegistry, environ: Mapping[str, str] | None = None
) -> RequestHook | None:
    """Export for `app` if the settings or `OTEL_*` variables turn it on: what the guard reports each finished
    request to. The OpenTelemetry SDK is imported only then."""
    from runguard.config import ConfigError
    from runguard.proxy.observe.telemetry.config import TelemetryConfigError

    try:
        config = resolve(settings.telemetry, os.environ if environ is None else environ)
    except TelemetryConfigError as exc:
        raise ConfigError(str(exc)) from exc
    if config is None:
        return None
    upstreams = {
        str(spec.name): settings.upstreams.base_url(spec.upstream.name, spec.upstream.default_url)
        for spec in provider_specs.REGISTRY.providers
    }
    upstreams.update((name, service.url) for name, service in settings.upstreams.compatible.items())
    telemetry = Telemetry(config, registry, {name: _server(url) for name, url in upstreams.items()})
    app.cleanup_ctx.append(telemetry.lifetime)
    log.info("OpenTelemetry export on: %s to %s", config.protocol, config.traces_endpoint or config.metrics_endpoint)
    return telemetry.tracer.request_done
