"""Which export the settings and the standard OTEL_* variables turn on."""

from __future__ import annotations

import pytest

from runguard.config.settings import TelemetrySettings
from runguard.proxy.observe.telemetry.config import GRPC, HTTP, TelemetryConfigError, parse_headers, resolve


def test_off_without_an_endpoint() -> None:
    assert resolve(TelemetrySettings(), {}) is None


def test_the_standard_endpoint_turns_it_on_over_http_with_signal_paths() -> None:
    config = resolve(TelemetrySettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert config is not None and config.protocol == HTTP
    assert config.traces_endpoint == "http://collector:4318/v1/traces"
    assert config.metrics_endpoint == "http://collector:4318/v1/metrics"
    assert config.service_name == "runguard-proxy" and not config.capture_content


def test_env_wins_over_the_file() -> None:
    settings = TelemetrySettings(endpoint="http://file:4318", service_name="from-file", headers={"x-a": "1"})
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_SERVICE_NAME": "from-env",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t,x-b=2",
    }
    config = resolve(settings, env)
    assert config is not None and config.protocol == GRPC and config.insecure
    assert config.traces_endpoint == "http://env:4317"  # gRPC: the endpoint as is
    assert config.service_name == "from-env"
    assert config.headers == {"x-a": "1", "authorization": "Bearer t", "x-b": "2"}


def test_per_signal_endpoints_and_exporters_set_to_none() -> None:
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces", "OTEL_METRICS_EXPORTER": "none"}
    config = resolve(TelemetrySettings(endpoint="http://file:4318"), env)
    assert config is not None
    assert config.traces_endpoint == "http://t:4318/v1/traces" and config.metrics_endpoint is None
    both_off = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
    assert resolve(TelemetrySettings(endpoint="http://file:4318"), both_off) is None


@pytest.mark.parametrize("env", [{"OTEL_SDK_DISABLED": "true"}, {"OTEL_SDK_DISABLED": "TRUE"}])
def test_sdk_disabled_wins_over_everything(env: dict[str, str]) -> None:
    settings = TelemetrySettings(enabled=True, endpoint="http://file:4318")
    assert resolve(settings, {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}) is None


def test_disabled_in_the_file_stays_off_with_an_endpoint() -> None:
    assert resolve(TelemetrySettings(enabled=False), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}) is None


@pytest.mark.parametrize(
    ("value", "captured"), [("true", True), ("SPAN_ONLY", True), ("false", False), ("NO_CONTENT", False)]
)
def test_content_capture_follows_the_genai_opt_in(value: str, captured: bool) -> None:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": value}
    config = resolve(TelemetrySettings(endpoint="http://c:4318", capture_content=not captured), env)
    assert config is not None and config.capture_content is captured


@pytest.mark.parametrize(
    ("settings", "env", "named"),
    [
        (TelemetrySettings(enabled=True), {}, "telemetry.enabled"),
        (TelemetrySettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "telemetry.endpoint"),
        (TelemetrySettings(endpoint="http://c"), {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "PROTOCOL"),
        (TelemetrySettings(endpoint="http://c"), {"OTEL_EXPORTER_OTLP_HEADERS": "no-equals"}, "HEADERS"),
    ],
)
def test_settings_that_cannot_work_are_named(settings: TelemetrySettings, env: dict[str, str], named: str) -> None:
    with pytest.raises(TelemetryConfigError, match=named):
        resolve(settings, env)


def test_header_values_are_not_echoed_in_errors() -> None:
    with pytest.raises(TelemetryConfigError) as caught:
        parse_headers("authorization=Bearer secret,broken")
    assert "secret" not in str(caught.value)
