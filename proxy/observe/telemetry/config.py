"""What OpenTelemetry export does, from the `telemetry:` settings and the standard `OTEL_*` variables.

The variables win over the file, as `RUNGUARD_*` ones do over it:
`OTEL_SDK_DISABLED=true` turns export off whatever the file says;
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT` / `..._METRICS_ENDPOINT`)
turns it on; `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_SERVICE_NAME`, `OTEL_TRACES_EXPORTER=none`, `OTEL_METRICS_EXPORTER=none` and
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` are read as the SDKs read them.
Read once, when the app is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote

from runguard.config import TelemetrySettings
from runguard.proxy.core.frozen import frozen

HTTP = "http/protobuf"
GRPC = "grpc"
DEFAULT_SERVICE = "runguard-proxy"
# The content opt-in's values (the instrumentation libraries' convention): "true", or where content goes.
CONTENT_ON = {"true", "1", "span_only", "span_and_event"}


class TelemetryConfigError(ValueError):
    """A telemetry setting that cannot work; its message names the setting."""


@frozen
class ExportConfig:
    """Where and how spans and metrics are exported; None of it exists when export is off."""

    protocol: str  # HTTP or GRPC
    traces_endpoint: str | None  # the full URL (HTTP: .../v1/traces; gRPC: host:port URL); None: no spans
    metrics_endpoint: str | None  # None: no metrics
    headers: Mapping[str, str]
    service_name: str
    capture_content: bool
    max_queue_size: int
    export_timeout: float
    metric_interval: float
    turn_idle: float

    @property
    def insecure(self) -> bool:
        """gRPC without TLS: an http:// endpoint (a collector on loopback or in the same pod)."""
        endpoint = self.traces_endpoint or self.metrics_endpoint or ""
        return endpoint.startswith("http://")


def _flag(value: str | None) -> bool | None:
    if value is None or not value.strip():
        return None
    return value.strip().lower() in ("true", "1", "yes", "on")


def parse_headers(text: str) -> dict[str, str]:
    """`OTEL_EXPORTER_OTLP_HEADERS`: comma-separated `key=value` pairs, URL-encoded; a malformed pair is an
    error that names the variable (the value itself is not shown: it usually holds a token)."""
    headers: dict[str, str] = {}
    for pair in text.split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TelemetryConfigError("OTEL_EXPORTER_OTLP_HEADERS: expected comma-separated key=value pairs")
        headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return headers


def _signal_url(base: str, protocol: str, signal: str) -> str:
    """The endpoint of one signal from the base URL: HTTP appends `/v1/<signal>`; gRPC uses the base as is."""
    if protocol == GRPC:
        return base
    return base.rstrip("/") + f"/v1/{signal}"


def resolve(settings: TelemetrySettings, environ: Mapping[str, str]) -> ExportConfig | None:
    """The export to run, or None when it is off (no endpoint, disabled in env or file)."""
    if _flag(environ.get("OTEL_SDK_DISABLED")):
        return None
    if settings.enabled is False:
        return None
    protocol = environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or settings.protocol or HTTP
    if protocol not in (HTTP, GRPC):
        raise TelemetryConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not http/protobuf or grpc")
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or settings.endpoint
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (base and _signal_url(base, protocol, "traces"))
    metrics = environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or (base and _signal_url(base, protocol, "metrics"))
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        traces = None
    if environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() == "none":
        metrics = None
    if not traces and not metrics:
        if settings.enabled:
            raise TelemetryConfigError("telemetry.enabled: set telemetry.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT")
        return None
    for url in (traces, metrics):
        if url and not url.startswith(("http://", "https://")):
            raise TelemetryConfigError(f"telemetry.endpoint: expected an http:// or https:// URL, got {url!r}")
    headers = dict(settings.headers)
    if environ.get("OTEL_EXPORTER_OTLP_HEADERS"):
        headers.update(parse_headers(environ["OTEL_EXPORTER_OTLP_HEADERS"]))
    content = environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    capture = content.strip().lower() in CONTENT_ON if content else settings.capture_content
    return ExportConfig(
        protocol=protocol,
        traces_endpoint=traces or None,
        metrics_endpoint=metrics or None,
        headers=headers,
        service_name=environ.get("OTEL_SERVICE_NAME") or settings.service_name or DEFAULT_SERVICE,
        capture_content=capture,
        max_queue_size=settings.max_queue_size,
        export_timeout=settings.export_timeout_seconds,
        metric_interval=settings.metric_interval_seconds,
        turn_idle=settings.agent_turn_idle_seconds,
    )
