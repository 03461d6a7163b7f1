"""A test OpenTelemetry collector on loopback: OTLP/HTTP (protobuf) and OTLP/gRPC, decoded with `opentelemetry-proto`.

It accepts what the official exporters send (`POST /v1/traces`, `POST /v1/metrics`
as `ExportTraceServiceRequest` / `ExportMetricsServiceRequest`; the gRPC
`TraceService/Export` and `MetricsService/Export`), decodes it with the official
protobuf classes and keeps plain records for assertions: spans with their
ids, parent, attributes, events and status, and the histogram points of each
metric. The headers of each export are kept too (auth headers from
`OTEL_EXPORTER_OTLP_HEADERS`).

Run it alone to watch a proxy's spans: `python -m tests.support.otlp_receiver` prints each one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from aiohttp import web
from google.protobuf.message import Message
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from runguard.proxy.serve.server import Running, start
from tests.support.upstream import closed_port

M = TypeVar("M", bound=Message)


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value_of(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def attributes_of(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


@dataclass(frozen=True)
class SpanEvent:
    name: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # hex
    span_id: str
    parent_span_id: str  # "" for a root
    kind: str  # SERVER, CLIENT, INTERNAL, ...
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[SpanEvent, ...]
    status: str  # UNSET, OK, ERROR
    status_message: str
    resource: dict[str, Any]
    scope: str


@dataclass(frozen=True)
class HistogramPoint:
    attributes: dict[str, Any]
    count: int
    total: float
    bounds: tuple[float, ...]


@dataclass
class ReceivedMetric:
    name: str
    unit: str
    points: list[HistogramPoint] = field(default_factory=list)


def _span(span: Span, resource: dict[str, Any], scope: str) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=attributes_of(span.attributes),
        events=tuple(SpanEvent(e.name, attributes_of(e.attributes)) for e in span.events),
        status=Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
        status_message=span.status.message,
        resource=resource,
        scope=scope,
    )


class OtlpReceiver:
    """Collects what exporters send; `wait_for` polls until a condition over what arrived holds."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.metrics: dict[str, ReceivedMetric] = {}
        self.headers: list[dict[str, str]] = []  # one per export, lower-case names
        self.exports = 0
        self._arrived = asyncio.Event()  # set by every export
        self._http: Running | None = None
        self._grpc: grpc.aio.Server | None = None
        self.http_url = ""
        self.grpc_url = ""

    # -- decoding ---------------------------------------------------------------------------------------

    def take_traces(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        self.exports += 1
        self._arrived.set()
        for resource_spans in request.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend(_span(s, resource, scope_spans.scope.name) for s in scope_spans.spans)

    def take_metrics(self, request: metrics_service_pb2.ExportMetricsServiceRequest) -> None:
        self.exports += 1
        self._arrived.set()
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    kept = self.metrics.setdefault(metric.name, ReceivedMetric(metric.name, metric.unit))
                    if metric.WhichOneof("data") != "histogram":
                        continue
                    kept.points = [
                        HistogramPoint(attributes_of(p.attributes), p.count, p.sum, tuple(p.explicit_bounds))
                        for p in metric.histogram.data_points
                    ]  # cumulative: the latest export holds every point

    # -- OTLP/HTTP --------------------------------------------------------------------------------------

    async def _http_export(
        self, request: web.Request, message: M, take: Callable[[M], None], answer: Message
    ) -> web.Response:
        """One OTLP/HTTP export: its headers kept, its body parsed into `message` and taken, `answer` sent back."""
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        message.ParseFromString(await request.read())
        take(message)
        return web.Response(body=answer.SerializeToString(), content_type="application/x-protobuf")

    async def _http_traces(self, request: web.Request) -> web.Response:
        message = trace_service_pb2.ExportTraceServiceRequest()
        answer = trace_service_pb2.ExportTraceServiceResponse()
        return await self._http_export(request, message, self.take_traces, answer)

    async def _http_metrics(self, request: web.Request) -> web.Response:
        message = metrics_service_pb2.ExportMetricsServiceRequest()
        answer = metrics_service_pb2.ExportMetricsServiceResponse()
        return await self._http_export(request, message, self.take_metrics, answer)

    async def start_http(self) -> str:
        """Listen for OTLP/HTTP; returns the base URL (what OTEL_EXPORTER_OTLP_ENDPOINT names)."""
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/traces", self._http_traces)
        app.router.add_post("/v1/metrics", self._http_metrics)
        self._http = await start(app, "127.0.0.1", 0)
        self.http_url = self._http.url
        return self.http_url

    # -- OTLP/gRPC --------------------------------------------------------------------------------------

    async def start_grpc(self) -> str:
        """Listen for OTLP/gRPC (plaintext); returns `http://127.0.0.1:<port>`."""
        receiver = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            async def Export(self, request: Any, context: Any) -> Any:
                receiver.headers.append({k: v for k, v in context.invocation_metadata()})
                receiver.take_traces(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            async def Export(self, request: Any, context: Any) -> Any:
                receiver.headers.append({k: v for k, v in context.invocation_metadata()})
                receiver.take_metrics(request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._grpc = server
        self.grpc_url = f"http://127.0.0.1:{port}"
        return self.grpc_url

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.stop()
        if self._grpc is not None:
            await self._grpc.stop(grace=None)

    # -- assertions -------------------------------------------------------------------------------------

    async def wait_for(self, condition: Callable[[OtlpReceiver], bool], seconds: float = 15.0) -> None:
        """Until `condition(self)` holds, checked at each export (they come on the exporter's schedule); fails
        after `seconds`."""
        try:
            async with asyncio.timeout(seconds):
                while not condition(self):
                    self._arrived.clear()
                    await self._arrived.wait()
        except TimeoutError:
            names = [s.name for s in self.spans]
            raise AssertionError(f"not received in {seconds} s; spans so far: {names}") from None

    def named(self, prefix: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]


def dead_endpoint() -> str:
    """An OTLP endpoint nothing listens on (connection refused)."""
    return f"http://127.0.0.1:{closed_port()}"


class _Swallow(asyncio.Protocol):
    def data_received(self, data: bytes) -> None:
        pass  # taken, never answered


async def hung_collector() -> tuple[asyncio.Server, str]:
    """A collector that accepts connections and requests and never answers: every export waits its whole
    timeout. Returns the server (close it) and its endpoint URL."""
    server = await asyncio.get_running_loop().create_server(_Swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def _main() -> None:
    receiver = OtlpReceiver()
    print("OTLP/HTTP on", await receiver.start_http(), "OTLP/gRPC on", await receiver.start_grpc(), flush=True)
    seen = 0
    with contextlib.suppress(asyncio.CancelledError):
        while True:
            await asyncio.sleep(0.5)
            for span in receiver.spans[seen:]:
                print(span.trace_id, span.parent_span_id or "-", span.span_id, span.name, span.attributes, flush=True)
            seen = len(receiver.spans)


if __name__ == "__main__":
    asyncio.run(_main())
