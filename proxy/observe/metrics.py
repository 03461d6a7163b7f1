"""Prometheus metrics for one proxy app, served at `GET /runguard/metrics`.

`Metrics` is an `Observer` (tokens, cost, latency, trips, faults) plus a
wrapper of the catch-all route (`counted`) that counts every provider-facing
request and the ones in flight, and the WebSockets open (a socket lives for a
whole session: as a request in flight it would hold that gauge up for hours).
Each app owns its `CollectorRegistry`, so several proxies in one process never
share counters and the prometheus default registry stays unused.

The request path only adds to plain ints and floats (a histogram observation is
one `bisect` and two additions); `Metrics` is also the collector of its
registry and builds the metric families from those numbers when scraped. The
families carry no `_created` series (prometheus_client's own metric objects add
one per counter and histogram child; nothing reads them).

Labels are bounded by construction: provider, api, status code, model,
detector, hook, action, outcome. API keys, key hashes, run ids and content
never become labels; model names come from clients, so past `max_models`
distinct names they count under `model="other"`.

Metric names (values in milliseconds where the name says `_ms`):
  runguard_requests_total{provider,api,status}      every provider-facing request
  runguard_in_flight_requests                       provider requests being served now (not WebSockets)
  runguard_open_websockets                          WebSockets being relayed now (Realtime, Live, Responses)
  runguard_blocked_requests_total{detector}         requests answered locally
  runguard_trips_total{detector,action}             verdicts that tripped (block) or warned
  runguard_usd_total{model}                         cost from usage and the pricing table (none for a model
                                                    never priced: its cost is unknown, not 0)
  runguard_unpriced_requests_total{model}           requests whose model has no price (their cost is unknown)
  runguard_usd_avoided_total{detector}              estimated cost avoided by blocking trips (store.costs)
  runguard_tokens_total{model,kind}                 input, output, cached, reasoning tokens
  runguard_upstream_latency_ms{provider,api}        send to end of response (streams: last byte)
  runguard_proxy_overhead_ms                        time spent in the proxy itself, after-work included
  runguard_overhead_ms{provider,api}                the x-runguard-overhead-ms of guarded responses (`overhead`)
  runguard_detector_faults_total{detector,hook}     detectors that raised (request went on)
  runguard_parse_errors_total{api,body}             bodies the adapters could not parse (request, or a 2xx response)
  runguard_unreadable_requests_total{provider,action}   model requests not parsed: forward, refuse, blocked
  runguard_state_errors_total                       state backend failures
  runguard_alerts_total{outcome}                    webhook deliveries: delivered, failed, dropped
  runguard_store_backlog, runguard_store_dropped_total   read from the record sink, when it has them
  runguard_state_degraded                           1 while the state backend is failing
  runguard_stage_seconds_total{stage}               seconds spent admitting, judging, writing records
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from itertools import accumulate
from typing import TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from runguard.proxy.core.safe_text import printable
from runguard.proxy.observe.live import Live, counter
from runguard.proxy.providers.common.history import HistoryCache
from runguard.proxy.providers.routes import resolve
from runguard.proxy.relay import is_upgrade, overhead
from runguard.proxy.store.costs import counted_avoided
from runguard.proxy.store.records import RequestRecord, TripRecord

UPSTREAM_BUCKETS_MS = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 120_000, 300_000)
OVERHEAD_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000)
TOKEN_KINDS = ("input", "output", "cached", "reasoning")
_PRICED = 1 + len(TOKEN_KINDS)  # a model row: [usd, *tokens, priced (0 or 1), unpriced requests]
_UNPRICED = _PRICED + 1
MAX_CACHED_PATHS = 1024  # distinct request paths whose route labels are remembered
MAX_MODELS = 256  # distinct model labels before the rest count as "other"
MAX_LABEL_CHARS = 200  # a model label longer than this is cut (client text)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Check = Callable[[web.Request], Awaitable[web.StreamResponse | None]]  # a refusal, or None: go on
K = TypeVar("K")


def _les(bounds: Sequence[float]) -> tuple[str, ...]:
    """The `le` values as prometheus_client writes them ("10.0", "0.25", "+Inf"): Go's float format, which is
    Python's `repr` for bounds below 1e6 (all of ours; the tests compare with prometheus_client's own histogram)."""
    return (*(repr(float(bound)) for bound in bounds), "+Inf")


_UPSTREAM_LES = _les(UPSTREAM_BUCKETS_MS)
_OVERHEAD_LES = _les(OVERHEAD_BUCKETS_MS)


def _bump(counts: dict[K, int], key: K) -> None:
    counts[key] = counts.get(key, 0) + 1


class _Histogram:
    """One histogram child: per-bucket counts (the last one is +Inf, not cumulative) and the sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # first bound >= value, as prometheus's `le`
        self.total += value

    def buckets(self, les: Sequence[str]) -> list[tuple[str, float]]:
        """(le, cumulative count) pairs, ending with +Inf (the count)."""
        return list(zip(les, accumulate(self.counts), strict=True))


def _histogram(
    name: str, doc: str, labels: Sequence[str], les: Sequence[str], children: Iterable[tuple[Sequence[str], _Histogram]]
) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for label_values, child in children:
        family.add_metric(label_values, child.buckets(les), child.total)
    return family


class Metrics:
    """Counters and histograms of one app; every method is cheap and never raises on bad input."""

    def __init__(self, max_models: int = MAX_MODELS) -> None:
        # No locks: requests and scrapes all run on the app's one event-loop thread and a scrape reads
        # these plain numbers in one synchronous pass, so nothing updates them concurrently
        # (prometheus_client's own metrics would take a lock per inc/observe).
        self._requests: dict[tuple[str, str, str], int] = {}  # (provider, api, status)
        self._in_flight = 0
        self._sockets = 0
        self._blocked: dict[str, int] = {}  # detector
        self._trips: dict[tuple[str, str], int] = {}  # (detector, action)
        self._avoided: dict[str, float] = {}  # detector
        self._faults: dict[tuple[str, str], int] = {}  # (detector, hook)
        self._parse_errors: dict[tuple[str, str], int] = {}  # (api, body)
        self._unreadable: dict[tuple[str, str], int] = {}  # (provider, action)
        self._state_errors = 0
        self._alerts: dict[str, int] = {}  # outcome
        # Per model label: [usd, *tokens in TOKEN_KINDS order, priced, unpriced requests]; client model names
        # map to their label's row.
        self._by_label: dict[str, list[float]] = {}
        self._by_model: dict[str, list[float]] = {}
        self._max_models = max_models
        self._upstream: dict[tuple[str, str], _Histogram] = {}  # (provider, api)
        self._overhead = _Histogram(OVERHEAD_BUCKETS_MS)
        self._overheads: dict[tuple[str, str], _Histogram] = {}  # (provider, api): x-runguard-overhead-ms
        # The handler resolved the route already; a path -> labels cache keeps a second resolve off the hot path.
        self._path_labels: dict[str, tuple[str, str]] = {}
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def watch(
        self,
        sink: object,
        degraded: Callable[[], bool],
        history: HistoryCache | None = None,
        stages: Callable[[], Mapping[str, float]] | None = None,
    ) -> None:
        """Expose the record sink's `backlog`/`dropped`/`busy_seconds` (if it has them), the state health, the
        history cache's counts and the seconds spent per stage (`stages`) at scrape time."""
        self.registry.register(Live(sink, degraded, history, stages))

    # -- Observer ---------------------------------------------------------------------------

    def request_done(self, record: RequestRecord) -> None:
        row = self._by_model.get(record.model)
        if row is None:
            row = self._model_row(record.model)
        # Counters only go up: a negative (or NaN) amount is skipped.
        if record.unpriced:
            row[_UNPRICED] += 1
        elif record.usd > 0 or record.input_tokens > 0 or record.output_tokens > 0:
            row[_PRICED] = 1.0  # its cost is known (a request that used nothing does not price a model)
            if record.usd > 0:
                row[0] += record.usd
        if record.input_tokens > 0:
            row[1] += record.input_tokens
        if record.output_tokens > 0:
            row[2] += record.output_tokens
        if record.cached_tokens > 0:
            row[3] += record.cached_tokens
        if record.reasoning_tokens > 0:
            row[4] += record.reasoning_tokens
        if record.upstream_ms is not None:
            key = (record.provider, record.api)
            upstream = self._upstream.get(key)
            if upstream is None:
                upstream = self._upstream[key] = _Histogram(UPSTREAM_BUCKETS_MS)
            upstream.observe(record.upstream_ms)
        self._overhead.observe(record.overhead_ms)
        if record.blocked_by:
            _bump(self._blocked, record.blocked_by)

    def tripped(self, trip: TripRecord) -> None:
        _bump(self._trips, (trip.detector, trip.action))
        avoided = counted_avoided(trip.action, trip.usd_avoided_estimate)
        if avoided > 0:
            self._avoided[trip.detector] = self._avoided.get(trip.detector, 0.0) + avoided

    def detector_fault(self, detector: str, hook: str) -> None:
        _bump(self._faults, (detector, hook))

    def state_error(self) -> None:
        self._state_errors += 1

    def parse_error(self, api: str, body: str = "request") -> None:
        _bump(self._parse_errors, (api, body))

    def unreadable(self, provider: str, action: str) -> None:
        _bump(self._unreadable, (provider, action))

    def alert_outcome(self, outcome: str) -> None:
        _bump(self._alerts, outcome)

    def _model_row(self, model: str) -> list[float]:
        label = printable(model)[:MAX_LABEL_CHARS] or "unknown"  # client text: no NUL or control bytes
        if len(self._by_model) >= self._max_models:
            label = "other"  # a client inventing model names must not grow the exposition
        row = self._by_label.get(label)
        if row is None:
            row = self._by_label[label] = [0.0] * (_UNPRICED + 1)
        if label != "other":
            self._by_model[model] = row
        return row

    # -- HTTP -------------------------------------------------------------------------------

    def _count(self, path: str, status: str) -> tuple[str, str]:
        """Count a request; its (provider, api) labels."""
        labels = self._path_labels.get(path)
        if labels is None:
            route = resolve(path)
            labels = (str(route.provider), str(route.api)) if route else ("none", "none")
            if len(self._path_labels) < MAX_CACHED_PATHS:
                self._path_labels[path] = labels
        key = (*labels, status)
        self._requests[key] = self._requests.get(key, 0) + 1  # inline, not _bump: every request
        return labels

    def counted(self, handler: Handler, own_paths: Check | None = None) -> Handler:
        """`handler` counting the provider requests it serves and keeping the in-flight gauge.

        A wrapper of the catch-all route, not an aiohttp middleware: an app without
        middlewares skips aiohttp's middleware chain, two calls more per request.
        `own_paths` (the admin access check) runs first on every path under `/runguard`
        that reaches the route; a response from it is the answer, not counted.
        RunGuard's own paths that reach it (unknown `/runguard/...`) are not counted.
        """

        async def serve(request: web.Request) -> web.StreamResponse:
            path = request.path
            if path.startswith("/runguard"):
                if own_paths is not None:
                    refused = await own_paths(request)
                    if refused is not None:
                        return refused
                if path.startswith("/runguard/"):
                    return await handler(request)
            socket = is_upgrade(request.method, request.headers)
            if socket:
                self._sockets += 1
            else:
                self._in_flight += 1
            status = "disconnected"  # the client went away (or the handler failed) before the response ended
            watch = None if socket else overhead.start(request)
            try:
                response = await handler(request)
                status = str(response.status)
                if watch is not None and not response.prepared:
                    watch.stamp(response.headers)  # answered locally: sent once this returns
                return response
            except web.HTTPException as exc:
                status = str(exc.status)
                raise
            finally:
                if socket:
                    self._sockets -= 1
                else:
                    self._in_flight -= 1
                labels = self._count(path, status)
                if watch is not None and watch.stamped is not None:
                    self._observe_overhead(labels, watch.stamped)

        return serve

    def _observe_overhead(self, labels: tuple[str, str], ms: float) -> None:
        histogram = self._overheads.get(labels)
        if histogram is None:
            histogram = self._overheads[labels] = _Histogram(OVERHEAD_BUCKETS_MS)
        histogram.observe(ms)

    # -- Scrape -----------------------------------------------------------------------------

    def collect(self) -> Iterable[Metric]:
        """The metric families, built from the current numbers (the registry calls this per scrape)."""
        yield counter(
            "runguard_requests_total",
            "Provider-facing requests.",
            ("provider", "api", "status"),
            self._requests.items(),
        )
        yield GaugeMetricFamily("runguard_in_flight_requests", "Provider requests being served.", value=self._in_flight)
        yield GaugeMetricFamily("runguard_open_websockets", "WebSockets being relayed.", value=self._sockets)
        blocked = (((detector,), n) for detector, n in self._blocked.items())
        yield counter("runguard_blocked_requests_total", "Requests answered locally.", ("detector",), blocked)
        yield counter("runguard_trips_total", "Detector trips.", ("detector", "action"), self._trips.items())
        usd = (((label,), row[0]) for label, row in self._by_label.items() if row[_PRICED])
        yield counter("runguard_usd_total", "Cost in USD.", ("model",), usd)
        unpriced = (((label,), row[_UNPRICED]) for label, row in self._by_label.items() if row[_UNPRICED])
        yield counter("runguard_unpriced_requests_total", "Requests whose model has no price.", ("model",), unpriced)
        avoided = (((detector,), usd) for detector, usd in self._avoided.items())
        yield counter("runguard_usd_avoided_total", "Estimated USD avoided by blocking trips.", ("detector",), avoided)
        tokens = (
            ((label, kind), count)
            for label, row in self._by_label.items()
            for kind, count in zip(TOKEN_KINDS, row[1:_PRICED], strict=True)
        )
        yield counter("runguard_tokens_total", "Tokens.", ("model", "kind"), tokens)
        yield _histogram(
            "runguard_upstream_latency_ms",
            "Upstream time per request in ms (streams: until the last byte).",
            ("provider", "api"),
            _UPSTREAM_LES,
            self._upstream.items(),
        )
        yield _histogram(
            "runguard_proxy_overhead_ms",
            "Time spent in the proxy per request, in ms.",
            (),
            _OVERHEAD_LES,
            [((), self._overhead)],
        )
        yield _histogram(
            "runguard_overhead_ms",
            "RunGuard's time on a request before its response headers were sent, less the wait for the "
            "upstream (to its response headers for a stream, to its last byte for a whole response), in ms: "
            "the x-runguard-overhead-ms header. A stream's relay and the accounting after the answer are not in it.",
            ("provider", "api"),
            _OVERHEAD_LES,
            self._overheads.items(),
        )
        yield counter(
            "runguard_detector_faults_total", "Detectors that raised.", ("detector", "hook"), self._faults.items()
        )
        yield counter("runguard_parse_errors_total", "Unparsable bodies.", ("api", "body"), self._parse_errors.items())
        yield counter(
            "runguard_unreadable_requests_total",
            "Model requests whose body could not be read, by what was done with them.",
            ("provider", "action"),
            self._unreadable.items(),
        )
        yield CounterMetricFamily("runguard_state_errors_total", "State backend failures.", value=self._state_errors)
        alerts = (((outcome,), n) for outcome, n in self._alerts.items())
        yield counter("runguard_alerts_total", "Webhook alert deliveries.", ("outcome",), alerts)

    def exposition(self) -> web.Response:
        """The registry in Prometheus text format."""
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
