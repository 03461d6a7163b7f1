"""The plug-in claim: a provider API defined here, in the test, and added to a registry works through the
real proxy (routes, credentials, errors, blocks, records, the recorded conversation, the `serve` banner and
`--help`) without an edit to any core file: a provider is its folder, its registry line and its price rows.
The import-linter contract `provider-seam` (tests/test_provider_seam.py) keeps the core from naming one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from multidict import CIMultiDict, MultiDict

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers import credentials, registry
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.routes import Route, resolve
from runguard.proxy.providers.spec import (
    CredentialPlaces,
    Door,
    PathRule,
    ProviderApi,
    ProviderSpec,
    Tier,
    UpstreamSetting,
)
from runguard.proxy.providers.transcript import Line
from tests.conftest import ProxyFactory
from tests.e2e.faults import eventually, requests_of
from tests.proxy.cli.views import invoke
from tests.support.dashboard import start_dashboard_proxy
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, closed_port

TOY = Provider("toy")
TOY_API = Api("toy_chat")


def toy_transcript(body: dict[str, Any], first: bool) -> list[Line]:
    """What a recorded toy request says: each message's content, under its role."""
    messages = body.get("messages")
    said = messages if isinstance(messages, list) else []
    return [Line("user", str(m.get("role")), str(m.get("content"))) for m in said if isinstance(m, dict)]


def toy_error(status: int, message: str, code: str) -> Mapping[str, Any]:
    return {"toy_error": {"status": status, "text": message, "why": code}}


class ToyAdapter(ChatAdapter):
    """A toy API that speaks Chat Completions' bodies but has errors of its own."""

    provider = TOY
    api = TOY_API

    def error_response(self, notice: StopNotice, *, stream: bool, status: int = 429) -> Synthetic:
        body = orjson.dumps({"toy_error": {"status": status, "text": notice.message, "why": notice.detector}})
        return Synthetic(status, {"Content-Type": "application/json"}, body)

    def stop_response(self, notice: StopNotice, request: Any) -> Synthetic | None:
        return None


TOY_PROVIDER = ProviderSpec(
    name=TOY,
    upstream=UpstreamSetting("toy", f"http://127.0.0.1:{closed_port()}", "RUNGUARD_TOY_UPSTREAM"),
    credentials=CredentialPlaces(("x-toy-key",), claims=("x-toy-key",)),
    doors=(
        Door(re.compile(r"^/toy/"), "toy", strip="/toy", tier=Tier.PREFIX),
        Door(re.compile(r"^/v1/toy(?:/|$)"), "toy", tier=Tier.NATIVE),
        Door(re.compile(r"^/v1/"), "toy", tier=Tier.KEYED, needs=frozenset({"toy_key"})),  # `/v1/...` with its key
    ),
    error_payload=toy_error,
    block_status=lambda guard: 418,
    telemetry_name="toy.ai",
    title="ToyAI",
    client_path="/toy",
)
TOY_SPEC = ProviderApi(
    name=TOY_API,
    provider=TOY_PROVIDER,
    adapter=ToyAdapter,
    paths=(PathRule("toy", re.compile(r"/complete$")),),
    transcript=toy_transcript,
)


@pytest.fixture
def with_toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy's registry, the toy's spec added (one line, as `registry.APIS` would have it)."""
    monkeypatch.setattr(registry, "REGISTRY", registry.Registry((*registry.APIS, TOY_SPEC)))


def test_its_paths_route_to_it_and_the_others_are_unchanged(with_toy: None) -> None:
    assert resolve("/toy/v1/complete") == Route(TOY, TOY_API, "/v1/complete")
    assert resolve("/v1/toy/complete") == Route(TOY, TOY_API, "/v1/toy/complete")
    assert resolve("/toy/v1/models") == Route(TOY, Api.OTHER, "/v1/models")
    assert resolve("/v1/chat/completions") == Route(Provider.OPENAI, Api.CHAT, "/v1/chat/completions")
    assert resolve("/v1/toys") == Route(Provider.OPENAI, Api.OTHER, "/v1/toys")  # a door matches whole segments
    route = resolve("/toy/v1/complete")
    assert route is not None and route.spec is TOY_SPEC and route.dialect == TOY


def test_a_shared_path_is_its_own_when_the_request_carries_its_key(with_toy: None) -> None:
    headers = CIMultiDict({"x-toy-key": "k"})
    facts = credentials.claims(headers, "", MultiDict())
    assert facts == {"toy_key"}
    assert resolve("/v1/complete", facts=facts) == Route(TOY, TOY_API, "/v1/complete")
    assert resolve("/v1/complete") == Route(Provider.OPENAI, Api.OTHER, "/v1/complete")
    both = credentials.claims(CIMultiDict({"x-toy-key": "k", "x-goog-api-key": "g"}), "", MultiDict())
    assert resolve("/v1/models", facts=both) == Route(Provider.GEMINI, Api.OTHER, "/v1/models")  # listed first


def test_without_it_its_paths_are_openai_s_or_nobody_s() -> None:
    assert resolve("/toy/v1/complete") is None
    assert resolve("/v1/toy/complete") == Route(Provider.OPENAI, Api.OTHER, "/v1/toy/complete")


async def test_a_request_is_forwarded_with_its_key_and_recorded_as_its_own(
    with_toy: None, upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    url = await make_proxy(upstreams={"others": {"toy": upstream.url}})
    body = {"model": "toy-1", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-toy-key": "toy-secret", "x-goog-api-key": "not-for-toy", "X-Run-Id": "toy-run"}
    async with httpx.AsyncClient() as client:
        answer = await client.post(url + "/toy/v1/complete", json=body, headers=headers)
    assert answer.status_code == 200
    (received,) = upstream.received
    assert received.path == "/v1/complete"  # its prefix removed
    assert received.headers["x-toy-key"] == "toy-secret"
    assert "x-goog-api-key" not in received.headers  # a key the toy does not read never leaves
    await eventually(lambda: len(requests_of(sink)) == 1)
    (record,) = requests_of(sink)
    assert (record.provider, record.api, record.model, record.run_id) == ("toy", "toy_chat", "toy-1", "toy-run")


async def test_its_blocks_and_the_proxy_s_own_errors_are_in_its_format(
    with_toy: None, upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    url = await make_proxy(upstreams={"others": {"toy": upstream.url}})
    body = {"model": "toy-1", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-toy-key": "toy-secret", "X-Run-Id": "toy-capped", "X-RunGuard-Max-Requests": "1"}
    async with httpx.AsyncClient() as client:
        first = await client.post(url + "/toy/v1/complete", json=body, headers=headers)
        blocked = await client.post(url + "/toy/v1/complete", json=body, headers=headers)
        twice = await client.post(url + "/toy/v1/complete", json=body, headers=[("x-toy-key", "a"), ("x-toy-key", "b")])
    assert first.status_code == 200
    assert blocked.status_code == 418  # its spec's block status
    assert blocked.json()["toy_error"]["why"] == "max_requests"
    assert blocked.headers["x-runguard-trip"] == "max_requests"
    assert twice.status_code == 400
    assert twice.json() == {
        "toy_error": {
            "status": 400,
            "text": "RunGuard: this request carries different API keys (x-toy-key); send one key, in one place",
            "why": "conflicting_credentials",
        }
    }
    assert len(upstream.received) == 1


async def test_its_upstream_is_the_one_its_setting_names(with_toy: None, make_proxy: ProxyFactory) -> None:
    url = await make_proxy()  # no `upstreams.others.toy`: its spec's default URL, where nothing listens
    async with httpx.AsyncClient() as client:
        answer = await client.post(url + "/v1/toy/complete", json={"model": "toy-1", "messages": []})
        keyed = await client.post(url + "/v1/complete", json={"model": "toy-1"}, headers={"x-toy-key": "k"})
    assert answer.status_code == keyed.status_code == 502
    assert answer.json()["toy_error"]["why"] == keyed.json()["toy_error"]["why"] == "upstream_unreachable"


def test_the_banner_and_the_help_name_it(with_toy: None) -> None:
    from typer.testing import CliRunner

    from runguard.proxy.cli.main import _banner, new_app
    from tests.support.proxy import settings_for

    settings = settings_for("http://127.0.0.1:9", upstreams={"others": {"toy": "http://127.0.0.1:11"}})
    banner = _banner(settings, "http://127.0.0.1:8787")
    assert "ToyAI upstream: http://127.0.0.1:11   (client base URL: http://127.0.0.1:8787/toy)" in banner
    shown = " ".join(CliRunner().invoke(new_app(), ["--help"], env={"COLUMNS": "200"}).stdout.split())
    assert "the OpenAI, Gemini, Anthropic, Vertex AI and ToyAI APIs" in shown


async def test_its_recorded_conversation_is_read_by_its_own_transcript(
    with_toy: None, upstream: FakeUpstream, tmp_path: Path
) -> None:
    store_url = f"sqlite+aiosqlite:///{tmp_path}/toy.db"
    running = await start_dashboard_proxy(upstream, store_url, upstreams={"others": {"toy": upstream.url}})
    body = {"model": "toy-1", "messages": [{"role": "user", "content": "play a song"}]}
    try:
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                running.url + "/toy/v1/complete", json=body, headers={"x-toy-key": "k", "X-Run-Id": "toy-talk"}
            )
            assert answer.status_code == 200
            for _ in range(200):  # the store writes in the background
                page = (await client.get(running.url + "/runguard/ui/runs/toy-talk")).text
                if "play a song" in page:
                    break
                await asyncio.sleep(0.02)
    finally:
        await running.stop()
    assert "play a song" in page
    detail = orjson.loads((await invoke("show", "toy-talk", "--json", url=store_url)).stdout)
    (request,) = detail["requests"]
    assert request["content"]["sent"] == [{"kind": "user", "title": "user", "text": "play a song"}]
