"""OpenTelemetry for one app: nothing at all unless the settings or the standard `OTEL_*` variables turn it
on; then the app's own providers export to the collector, end the open agent turns at shutdown and give
up on a collector that never answers instead of holding the proxy's stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from runguard.config.loader import ConfigError
from runguard.proxy.observe.telemetry.setup import _server, install
from tests.e2e import agents as loops
from tests.support.otel import telemetry
from tests.support.otlp_receiver import OtlpReceiver, hung_collector
from tests.support.processes import start_serve
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream


def test_export_off_installs_nothing() -> None:
    app = web.Application()
    assert install(app, settings_for("http://127.0.0.1:9"), CollectorRegistry(), environ={}) is None
    assert len(app.cleanup_ctx) == 0


async def test_export_on_installs_a_request_hook_its_lifetime_and_its_drop_counters() -> None:
    app, registry = web.Application(), CollectorRegistry()
    hook = install(
        app,
        settings_for("http://127.0.0.1:9"),
        registry,
        environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
    )
    assert callable(hook) and len(app.cleanup_ctx) == 1
    assert b"runguard_otel_spans_queued" in generate_latest(registry)
    runner = web.AppRunner(app)
    await runner.setup()  # the lifetime starts (its sweeper) ...
    await runner.cleanup()  # ... and ends: nothing was queued, so the shutdown is quick


def test_settings_that_cannot_work_stop_the_start_as_a_config_error() -> None:
    with pytest.raises(ConfigError, match="PROTOCOL"):
        install(
            web.Application(),
            settings_for("http://127.0.0.1:9"),
            CollectorRegistry(),
            environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
        )


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("https://api.openai.com", ("api.openai.com", 443)),
        ("http://127.0.0.1:8080/openai", ("127.0.0.1", 8080)),
        ("http://gateway.internal", ("gateway.internal", 80)),
    ],
)
def test_the_upstream_s_host_and_port_name_the_server(url: str, server: tuple[str, int]) -> None:
    assert _server(url) == server


@pytest.mark.slow
async def test_serve_exports_with_the_standard_otel_variables(
    receiver: OtlpReceiver, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = loops.chat_script(steps=1)
    config = tmp_path / "runguard.yaml"
    config.write_text(yaml.safe_dump(settings_for(upstream.url).model_dump(mode="json", include={"upstreams"})))
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=team%20a",
        "OTEL_SERVICE_NAME": "guard-sidecar",
        "RUNGUARD_DATABASE_URL": "",
    }
    served = await start_serve(env, tmp_path, "--config", str(config))
    try:
        client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-otel-serve", max_retries=0)
        await loops.chat_agent(client, loops.progressing_tool)
        await client.close()
        await receiver.wait_for(lambda r: len(r.named("chat ")) == 2)
    finally:
        await served.stop()
    assert {s.resource["service.name"] for s in receiver.spans} == {"guard-sidecar"}
    assert any(h.get("x-tenant") == "team a" for h in receiver.headers)
    await receiver.wait_for(lambda r: len(r.named("invoke_agent")) == 1)  # the open turn ended at shutdown


@pytest.mark.slow
async def test_serve_with_otel_sdk_disabled_exports_nothing(
    receiver: OtlpReceiver, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = loops.chat_script(steps=1)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_url,
        "OTEL_SDK_DISABLED": "true",
        "RUNGUARD_OPENAI_UPSTREAM": upstream.url,
        "RUNGUARD_DATABASE_URL": "",
    }
    served = await start_serve(env, tmp_path)
    try:
        client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-otel-off", max_retries=0)
        await loops.chat_agent(client, loops.progressing_tool)
        await client.close()
        async with httpx.AsyncClient() as http:
            scraped = (await http.get(served.url + "/runguard/metrics")).text
    finally:
        await served.stop()  # a shutdown flushes whatever was queued
    assert "runguard_requests_total" in scraped and "runguard_otel_spans" not in scraped  # no exporter was built
    assert receiver.exports == 0


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
async def test_a_collector_that_never_answers_costs_requests_nothing_and_shutdown_gives_up_on_it(
    upstream: FakeUpstream, sdk_client: Any, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    hung, endpoint = await hung_collector()
    upstream.script = loops.chat_script(steps=3)
    more = {"protocol": protocol, "max_queue_size": 3, "export_timeout_seconds": 1}
    proxy = await start_proxy(settings_for(upstream.url, **telemetry(endpoint, **more)))
    try:
        client = sdk_client(proxy.url, "sk-otel-hung", {"X-Run-Id": "otel-hung"})
        for _ in range(3):  # 12 requests, 9 tool results: more spans than the queue holds
            assert await loops.chat_agent(client, loops.progressing_tool) == "Done."
        async with httpx.AsyncClient() as http:
            scraped = (await http.get(proxy.url + "/runguard/metrics")).text
    finally:
        await proxy.stop()
        hung.close()
    dropped = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith("runguard_otel_spans_dropped_total")
    }
    assert dropped["queue_full"] > 0  # the queue stayed bounded while the collector hung
    assert "stopping without" in caplog.text  # the shutdown waited one export timeout, then left
