"""Typed settings for the proxy.

Every field carries a description: that text is the configuration reference
(`runguard-proxy config show` prints it). Detector settings are validated
against each detector's own config model by `runguard.config.loader`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from runguard.config.backends import StateSettings, StoreSettings
from runguard.config.compatible import CompatibleUpstream, check_names
from runguard.config.section import Section as _Section
from runguard.config.section import http_url as _http_url


class ServerSettings(_Section):
    host: str = Field("127.0.0.1", description="Address to bind. Beyond loopback the admin API needs admin_token.")
    port: int = Field(8787, ge=0, le=65535, description="Port to listen on (0 picks a free port).")
    admin_token: SecretStr | None = Field(
        None, description="Bearer token for /runguard/ admin endpoints; required when bound beyond localhost."
    )
    admin_hosts: tuple[str, ...] = Field(
        (),
        description="Names (`name`, or `name:port` for one port) the admin routes also answer to in the Host "
        "header, besides the bound address, localhost and loopback addresses: the name a reverse proxy or "
        "a scraper uses (e.g. `runguard.internal`). Other names are refused (DNS rebinding).",
    )
    max_body_bytes: int = Field(
        32 * 1024 * 1024,
        gt=0,
        description="Largest model request (chat completions, responses, generateContent) accepted; larger ones "
        "get a provider-style 413. Requests RunGuard does not read (file uploads, audio, ...) stream through "
        "whatever their size.",
    )
    shutdown_grace_seconds: float = Field(
        30.0,
        ge=0,
        description="How long a graceful shutdown takes at most, all of it: in-flight streams get all but the "
        "last fifth (at most 5 s), then end with their provider's error event; the rest finishes their records.",
    )
    header_timeout: float = Field(
        20.0,
        gt=0,
        description="Seconds a client has to send a request's whole head (request line and headers) from its first "
        "byte, or from opening the connection; then the connection is closed (a slowloris holds it forever).",
    )
    body_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds a request body may pause between two pieces before the connection is closed and the "
        "request abandoned (a long upload that keeps moving is never cut).",
    )
    keepalive_timeout: float = Field(
        75.0, gt=0, description="Seconds an idle keep-alive connection stays open waiting for its next request."
    )
    history_cache_mb: int = Field(
        32,
        ge=0,
        description=(
            "Memory for reading long conversations from where their last request left off (each request of "
            "an agent loop resends its history; only the new turns are parsed). 0 reads every request whole."
        ),
    )

    @field_validator("admin_hosts", mode="before")
    @classmethod
    def _host_list(cls, value: Any) -> Any:
        """`a, b` (one environment variable) reads as the list `[a, b]`."""
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value


class UpstreamSettings(_Section):
    openai: str = Field("https://api.openai.com", description="Base URL of the OpenAI API (no /v1).")
    gemini: str = Field(
        "https://generativelanguage.googleapis.com", description="Base URL of the Gemini API (no /v1beta)."
    )
    anthropic: str = Field("https://api.anthropic.com", description="Base URL of the Anthropic API (no /v1).")
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to open a connection upstream.")
    first_byte_timeout: float = Field(600.0, gt=0, description="Seconds to wait for the upstream's response headers.")
    idle_timeout: float = Field(
        300.0, gt=0, description="Seconds a response body or stream may stay silent before it is abandoned."
    )
    pool_size: int = Field(256, gt=0, description="Keep-alive connections per upstream provider.")
    trust_env: bool = Field(
        False,
        description="Reach the providers through the proxy that HTTPS_PROXY / HTTP_PROXY name (NO_PROXY "
        "excepted), as the SDKs do by default; off: connect directly.",
    )
    inject_stream_usage: bool = Field(
        False,
        description=(
            "Ask upstream for usage on streamed Chat Completions that did not request it "
            "(stream_options.include_usage) and remove that extra chunk from what the client sees."
        ),
    )

    compatible: dict[str, CompatibleUpstream] = Field(
        default_factory=dict,
        description="OpenAI-compatible services by name (`upstreams.compatible.<name>: {url, prices}`), each "
        "reached at base URL http://HOST:PORT/<name>/v1 and guarded like OpenAI (see docs/clients.md).",
    )
    others: dict[str, str] = Field(
        default_factory=dict,
        description="Base URLs of the upstreams of provider APIs added as plug-ins, by their setting's name "
        "(`upstreams.others.<name>`, env `RUNGUARD_<NAME>_UPSTREAM`); a provider named nowhere here is sent "
        "to its spec's default URL.",
    )

    @field_validator("openai", "gemini", "anthropic")
    @classmethod
    def _base_url(cls, url: str) -> str:
        return _http_url(url)

    @field_validator("others")
    @classmethod
    def _base_urls(cls, urls: dict[str, str]) -> dict[str, str]:
        return {name: _http_url(url) for name, url in urls.items()}

    @field_validator("compatible")
    @classmethod
    def _compatible(cls, upstreams: dict[str, CompatibleUpstream]) -> dict[str, CompatibleUpstream]:
        for name, upstream in check_names(upstreams).items():
            try:
                _http_url(upstream.url)
            except ValueError as exc:
                raise ValueError(f"upstreams.compatible.{name}.url: {exc}") from exc
        return upstreams

    def base_url(self, name: str, default: str) -> str:
        """The base URL of the upstream whose setting is `name`: a field of its own (`openai`, `gemini`),
        else an entry of `others`, else the provider's `default`."""
        own = getattr(self, name, None) if name in type(self).model_fields and name != "others" else None
        return own if isinstance(own, str) else self.others.get(name, default)


_TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY_HASH = re.compile(r"^k_[0-9a-f]{16}$")


def check_tenants(tenants: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """`runs.tenants` if every name is plain and no key hash is malformed or in two tenants; else a ValueError."""
    owner: dict[str, str] = {}
    for name, hashes in tenants.items():
        if not _TENANT_NAME.match(name) or name.startswith("k_"):
            raise ValueError(f"tenant name {name!r}: letters, digits, '_', '.', '-' (not starting with 'k_')")
        for key_hash in hashes:
            if not _KEY_HASH.match(key_hash):
                raise ValueError(f"tenant {name!r}: {key_hash!r} is not a key hash (k_ and 16 hex digits)")
            if owner.setdefault(key_hash, name) != name:
                raise ValueError(f"key hash {key_hash} is in two tenants: {owner[key_hash]!r} and {name!r}")
    return tenants


class RunSettings(_Section):
    run_header: str = Field("X-Run-Id", min_length=1, description="Request header that names the run.")
    agent_header: str = Field("X-Agent-Name", min_length=1, description="Request header that names the agent speaking.")
    idle_seconds: float = Field(3600.0, gt=0, description="A run with no request for this long is forgotten.")
    inferred_idle_seconds: float = Field(
        600.0,
        gt=0,
        description="A conversation without the run header that starts over (no assistant turn yet) after its "
        "run has been idle this long, with no request in flight, is a new run (a scheduled agent's next "
        "invocation).",
    )
    remember_seconds: float = Field(
        7 * 86400.0,
        gt=0,
        description="How long a run's trace outlives its last request: a run with a long conversation named again "
        "after it was forgotten (idle) within this time is resumed, not a new run opening with an earlier "
        "session's history (session_bloat).",
    )
    max_runs: int = Field(
        100_000,
        gt=0,
        description="In-memory state keeps at most this many entries (runs, keys, nested conversations): "
        "past it the least recently used that holds no stop and no spend is dropped; stops and a key's spend "
        "are kept until idle. About 3-29 KB each.",
    )
    max_runs_per_tenant: int = Field(
        10_000,
        gt=0,
        description="In-memory state keeps at most this many runs of one tenant: a new run past it drops the "
        "tenant's own least recently used run that is not stopped, or is refused (429 state_full) when all are.",
    )
    key_salt: SecretStr | None = Field(
        None, description="Salt for API-key hashes. Unset: one is created in RUNGUARD_HOME/salt on first start."
    )
    key_allowlist: tuple[str, ...] = Field(
        (), description="If set, only these API-key hashes may use the proxy; others get a 403."
    )
    tenants: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="Tenants that hold more than one API key, by name: {name: [key hash, ...]} (hashes as "
        "`runguard-proxy key-hash` prints them). A run (X-Run-Id, previous_response_id, a conversation's root) "
        "belongs to its tenant: the keys of one tenant share their runs, other tenants never see them. A key "
        "named nowhere is a tenant of its own.",
    )

    @field_validator("tenants")
    @classmethod
    def _tenants(cls, tenants: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        return check_tenants(tenants)


class AlertSettings(_Section):
    webhooks: tuple[str, ...] = Field((), description="URLs that receive a JSON POST on every blocking trip.")
    timeout: float = Field(5.0, gt=0, description="Seconds per webhook attempt.")
    retries: int = Field(3, ge=0, description="Extra attempts for a failed webhook delivery.")

    @field_validator("webhooks")
    @classmethod
    def _webhook_urls(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_http_url(url) for url in urls)


class BreakerSettings(_Section):
    cooldown_seconds: float = Field(60.0, gt=0, description="How long a tripped breaker stays open before a probe.")
    max_cooldown_seconds: float = Field(900.0, gt=0, description="Cap of the cooldown, which doubles per re-trip.")
    probe_timeout_seconds: float = Field(
        120.0, gt=0, description="A half-open probe that has not finished after this long frees the probe slot."
    )

    @model_validator(mode="after")
    def _cooldown_within_its_cap(self) -> BreakerSettings:
        if self.cooldown_seconds > self.max_cooldown_seconds:
            raise ValueError(
                f"cooldown_seconds ({self.cooldown_seconds:g}) is more than max_cooldown_seconds "
                f"({self.max_cooldown_seconds:g}), its cap"
            )
        return self


class Override(_Section):
    """Detector settings for requests that match a key hash, key label and/or model."""

    key: str | None = Field(None, description="API-key hash (as shown by `runguard-proxy runs`) or a label.")
    model: str | None = Field(None, description="Model name; a trailing * matches a prefix.")
    detectors: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Detector settings to apply.")


# The client families a stop's answer is chosen for (`runguard.proxy.providers.common.clients.ClientFamily`).
CLIENT_FAMILIES = ("vercel_ai", "codex", "claude_code", "langchain_google", "smolagents", "crewai", "other")


class GuardSettings(_Section):
    shadow: bool = Field(False, description="Shadow mode: every detector only warns, nothing is blocked.")
    judging: Literal["beside", "inline"] = Field(
        "beside",
        description="With a state that waits (Redis): where a request's end (accounting, response detectors, "
        "breakers, records) runs. beside: in a task of its own once the answer went out, the run's next request "
        "waiting for it if it is still running; inline: in the request's handler, holding its connection. With "
        "the in-memory state the end always runs in the handler, after the answer went out.",
    )
    gemini_error_status: Literal[429, 400] = Field(
        429, description="Status of Gemini error responses: 429 RESOURCE_EXHAUSTED, or 400 FAILED_PRECONDITION."
    )
    client_answers: dict[str, Literal["error", "refuse", "stop"]] = Field(
        default_factory=dict,
        description="What a block set to `response: auto` answers each client family (known by its User-Agent: "
        "vercel_ai, codex, claude_code, langchain_google, smolagents, crewai, other): error (429), refuse (400) or "
        "stop. Unset: refuse for vercel_ai, codex, langchain_google and smolagents; stop for crewai; error for "
        "claude_code and other (docs/stopping.md).",
    )
    unreadable: Literal["forward", "refuse"] = Field(
        "forward",
        description="A model request whose body cannot be parsed (not JSON, a lone surrogate, nested too deep, an "
        "unknown Content-Encoding): forward it untouched, or refuse it with the provider's 400. Either way it "
        "counts toward its run (X-Run-Id, else its key's anonymous run) and key, an open breaker or a reached cap "
        "stops it, and it is recorded and counted in runguard_unreadable_requests_total.",
    )
    key_labels: dict[str, str] = Field(
        default_factory=dict, description="Human labels for API-key hashes, usable in overrides."
    )

    @field_validator("client_answers")
    @classmethod
    def _known_client_families(cls, answers: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(answers) - set(CLIENT_FAMILIES))
        if unknown:
            raise ValueError(f"unknown client family {', '.join(unknown)} (known: {', '.join(CLIENT_FAMILIES)})")
        return answers

    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    detectors: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-detector settings, e.g. {spiral: {threshold: 0.8}}."
    )
    overrides: tuple[Override, ...] = Field((), description="Detector settings per API key and per model.")


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    access_log: bool = Field(True, description="Write one JSON line per request.")


class TelemetrySettings(_Section):
    """OpenTelemetry export (docs/opentelemetry.md). The standard `OTEL_*` variables win over these."""

    enabled: bool | None = Field(
        None, description="Export spans and metrics over OTLP; unset: on when an endpoint is set (here or in env)."
    )
    endpoint: str | None = Field(
        None, description="OTLP collector base URL, as OTEL_EXPORTER_OTLP_ENDPOINT (http://host:4318, or :4317 grpc)."
    )
    protocol: Literal["http/protobuf", "grpc"] | None = Field(
        None, description="OTLP transport, as OTEL_EXPORTER_OTLP_PROTOCOL; unset: http/protobuf."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Headers sent to the collector (auth), as OTEL_EXPORTER_OTLP_HEADERS."
    )
    service_name: str | None = Field(None, description="service.name of the spans; unset: runguard-proxy.")
    capture_content: bool = Field(
        False,
        description="Put message text, tool arguments and tool results on spans (off: ids, names and counts only), "
        "as OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.",
    )
    max_queue_size: int = Field(2048, gt=0, description="Spans waiting for export before new ones are dropped.")
    export_timeout_seconds: float = Field(10.0, gt=0, description="Seconds one export to the collector may take.")
    metric_interval_seconds: float = Field(60.0, gt=0, description="Seconds between metric exports.")
    agent_turn_idle_seconds: float = Field(
        30.0, gt=0, description="An agent turn's span ends after its agent has been silent this long."
    )


class Settings(_Section):
    server: ServerSettings = Field(default_factory=ServerSettings)
    upstreams: UpstreamSettings = Field(default_factory=UpstreamSettings)
    runs: RunSettings = Field(default_factory=RunSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    guard: GuardSettings = Field(default_factory=GuardSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    pricing_file: str | None = Field(None, description="YAML pricing table that extends the shipped one.")
    models_file: str | None = Field(None, description="YAML context-window table that extends the shipped one.")
