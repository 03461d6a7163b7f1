"""Prometheus metrics for one proxy app, served at `GET /runguard/metrics`.

`Metrics` is an `Observer` (tokens, cost, latency, trips, faults) plus an
aiohttp middleware that counts every provider-facing request and the ones in
flight. Each app owns its `CollectorRegistry`, so several proxies in one
process never share counters and the prometheus default registry stays unused.

Labels are bounded by construction: provider, api, status code, model,
detector, hook, action, outcome. API keys, key hashes, run ids and content
never become labels; model names come from clients, so past `max_models`
distinct names they count under `model="other"`.

Metric names (values in milliseconds where the name says `_ms`):
  runguard_requests_total{provider,api,status}      every provider-facing request
  runguard_in_flight_requests                       provider requests being served now
  runguard_blocked_requests_total{detector}         requests answered locally
  runguard_trips_total{detector,action}             verdicts that tripped (block) or warned
  runguard_usd_total{model}                         cost from usage and the pricing table
  runguard_tokens_total{model,kind}                 input, output, cached, reasoning tokens
  runguard_upstream_latency_ms{provider,api}        send to end of response (streams: last byte)
  runguard_proxy_overhead_ms                        time spent in the proxy itself
  runguard_detector_faults_total{detector,hook}     detectors that raised (request went on)
  runguard_parse_errors_total{api}                  bodies the adapters could not parse
  runguard_state_errors_total                       state backend failures
  runguard_alerts_total{outcome}                    webhook deliveries: delivered, failed, dropped
  runguard_store_backlog, runguard_store_dropped_total   read from the record sink, when it has them
  runguard_state_degraded                           1 while the state backend is failing
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from runguard.proxy.records import RequestRecord, TripRecord
from runguard.proxy.routes import resolve

UPSTREAM_BUCKETS_MS = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 120_000, 300_000)
OVERHEAD_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000)
TOKEN_KINDS = ("input", "output", "cached", "reasoning")
MAX_CACHED_PATHS = 1024  # distinct request paths whose route labels are remembered

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _number(source: object, name: str) -> float | None:
    """`source.name` as a number (attribute, property or zero-argument method), else None."""
    value = getattr(source, name, None)
    if callable(value):
        value = value()
    return float(value) if isinstance(value, int | float) else None


def _child(cache: dict[tuple[str, ...], Any], metric: Any, labels: tuple[str, ...]) -> Any:
    """The metric's child for `labels`, cached (callers keep the label values bounded)."""
    child = cache.get(labels)
    if child is None:
        child = cache[labels] = metric.labels(*labels)
    return child


class _Live:
    """Values read at scrape time: the record sink's backlog and drops, the guard's health."""

    def __init__(self, sink: object, degraded: Callable[[], bool]) -> None:
        self._sink = sink
        self._degraded = degraded

    def collect(self) -> Iterable[Metric]:
        backlog = _number(self._sink, "backlog")
        if backlog is not None:
            yield GaugeMetricFamily("runguard_store_backlog", "Records waiting for the store.", value=backlog)
        dropped = _number(self._sink, "dropped")
        if dropped is not None:
            yield CounterMetricFamily("runguard_store_dropped", "Records dropped: store queue full.", value=dropped)
        degraded = 1.0 if self._degraded() else 0.0
        yield GaugeMetricFamily("runguard_state_degraded", "1 while the state backend is failing.", value=degraded)


class Metrics:
    """Counters and histograms of one app; every method is cheap and never raises on bad input."""

    def __init__(self, max_models: int = 256) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self._requests = Counter(
            "runguard_requests_total", "Provider-facing requests.", ["provider", "api", "status"], registry=reg
        )
        self._in_flight = Gauge("runguard_in_flight_requests", "Provider requests being served.", registry=reg)
        self._blocked = Counter(
            "runguard_blocked_requests_total", "Requests answered locally.", ["detector"], registry=reg
        )
        self._trips = Counter("runguard_trips_total", "Detector trips.", ["detector", "action"], registry=reg)
        self._usd = Counter("runguard_usd_total", "Cost in USD.", ["model"], registry=reg)
        self._tokens = Counter("runguard_tokens_total", "Tokens.", ["model", "kind"], registry=reg)
        self._upstream = Histogram(
            "runguard_upstream_latency_ms",
            "Upstream time per request in ms (streams: until the last byte).",
            ["provider", "api"],
            buckets=UPSTREAM_BUCKETS_MS,
            registry=reg,
        )
        self._overhead = Histogram(
            "runguard_proxy_overhead_ms",
            "Time spent in the proxy per request, in ms.",
            buckets=OVERHEAD_BUCKETS_MS,
            registry=reg,
        )
        self._faults = Counter(
            "runguard_detector_faults_total", "Detectors that raised.", ["detector", "hook"], registry=reg
        )
        self._parse_errors = Counter("runguard_parse_errors_total", "Unparsable bodies.", ["api"], registry=reg)
        self._state_errors = Counter("runguard_state_errors_total", "State backend failures.", registry=reg)
        self._alerts = Counter("runguard_alerts_total", "Webhook alert deliveries.", ["outcome"], registry=reg)
        self._max_models = max_models
        # Label children cached per key: one dict lookup per request instead of the client's lock and checks.
        self._request_children: dict[tuple[str, ...], Any] = {}
        self._model_children: dict[str, tuple[Any, tuple[Any, ...]]] = {}
        self._latency_children: dict[tuple[str, ...], Any] = {}
        # The handler resolved the route already; a path -> labels cache keeps a second resolve off the hot path.
        self._path_labels: dict[str, tuple[str, str]] = {}

    def watch(self, sink: object, degraded: Callable[[], bool]) -> None:
        """Expose the record sink's `backlog`/`dropped` (if it has them) and the state health at scrape time."""
        self.registry.register(_Live(sink, degraded))

    # -- Observer ---------------------------------------------------------------------------

    def request_done(self, record: RequestRecord) -> None:
        usd, tokens = self._model(record.model)
        if record.usd:
            usd.inc(record.usd)
        for child, count in zip(
            tokens,
            (record.input_tokens, record.output_tokens, record.cached_tokens, record.reasoning_tokens),
            strict=True,
        ):
            if count:
                child.inc(count)
        if record.upstream_ms is not None:
            _child(self._latency_children, self._upstream, (record.provider, record.api)).observe(record.upstream_ms)
        self._overhead.observe(record.overhead_ms)
        if record.blocked_by:
            self._blocked.labels(record.blocked_by).inc()

    def tripped(self, trip: TripRecord) -> None:
        self._trips.labels(trip.detector, trip.action).inc()

    def detector_fault(self, detector: str, hook: str) -> None:
        self._faults.labels(detector, hook).inc()

    def state_error(self) -> None:
        self._state_errors.inc()

    def parse_error(self, api: str) -> None:
        self._parse_errors.labels(api).inc()

    def alert_outcome(self, outcome: str) -> None:
        self._alerts.labels(outcome).inc()

    def _model(self, model: str) -> tuple[Any, tuple[Any, ...]]:
        children = self._model_children.get(model)
        if children is None:
            label = model or "unknown"
            if len(self._model_children) >= self._max_models:
                label = "other"  # a client inventing model names must not grow the registry
            children = (self._usd.labels(label), tuple(self._tokens.labels(label, kind) for kind in TOKEN_KINDS))
            if label != "other":
                self._model_children[model] = children
        return children

    # -- HTTP -------------------------------------------------------------------------------

    def _count(self, path: str, status: str) -> None:
        labels = self._path_labels.get(path)
        if labels is None:
            route = resolve(path)
            labels = (route.provider.value, route.api.value) if route else ("none", "none")
            if len(self._path_labels) < MAX_CACHED_PATHS:
                self._path_labels[path] = labels
        provider, api = labels
        _child(self._request_children, self._requests, (provider, api, status)).inc()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Counts provider requests and keeps the in-flight gauge; RunGuard's own routes are skipped."""
        if request.path.startswith("/runguard/"):
            return await handler(request)
        self._in_flight.inc()
        status = "disconnected"  # the client went away (or the handler failed) before the response ended
        try:
            response = await handler(request)
            status = str(response.status)
            return response
        except web.HTTPException as exc:
            status = str(exc.status)
            raise
        finally:
            self._in_flight.dec()
            self._count(request.path, status)

    def exposition(self) -> web.Response:
        """The registry in Prometheus text format."""
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
