"""Anthropic's spec in the routing table, the credential reader and the proxy's own errors."""

from __future__ import annotations

import orjson
import pytest
from multidict import CIMultiDict

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers import credentials, registry
from runguard.proxy.providers.anthropic.spec import PROVIDER, SPEC, error_payload
from runguard.proxy.providers.routes import raw_target, resolve
from runguard.proxy.providers.spec import Tier

MARKED = frozenset({"header:anthropic-version"})


@pytest.mark.parametrize(
    ("path", "api", "upstream_path"),
    [
        ("/v1/messages", "messages", "/v1/messages"),
        ("/v1/messages/count_tokens", Api.OTHER, "/v1/messages/count_tokens"),
        ("/v1/messages/batches", Api.OTHER, "/v1/messages/batches"),
        ("/v1/models", Api.OTHER, "/v1/models"),
        ("/v1/chat/completions", Api.OTHER, "/v1/chat/completions"),  # whatever the path: never OpenAI's
        ("/openai/v1/chat/completions", Api.OTHER, "/openai/v1/chat/completions"),
        (
            "/v1beta/models/gemini-2.5-flash:generateContent",
            Api.OTHER,
            "/v1beta/models/gemini-2.5-flash:generateContent",
        ),
        ("/anthropic/v1/messages", "messages", "/v1/messages"),
    ],
)
def test_a_request_with_anthropic_version_is_anthropic_s_whatever_its_path(
    path: str, api: str, upstream_path: str
) -> None:
    route = resolve(path, gemini_key=True, api_version=True, facts=MARKED)
    assert route is not None
    assert (route.provider, route.api, route.upstream_path) == ("anthropic", api, upstream_path)
    assert route.dialect == "anthropic"


def test_the_anthropic_prefix_routes_without_the_header() -> None:
    route = resolve("/anthropic/v1/messages")
    assert route is not None and (route.provider, route.api, route.upstream_path) == (
        "anthropic",
        "messages",
        "/v1/messages",
    )
    other = resolve("/anthropic/v1/models")
    assert other is not None and (other.provider, other.api, other.upstream_path) == (
        "anthropic",
        Api.OTHER,
        "/v1/models",
    )


def test_without_the_header_v1_paths_stay_openai_s() -> None:
    """Neither a bare /v1/messages nor a key header makes a request Anthropic's (an OpenAI key must not go there)."""
    for path in ("/v1/messages", "/v1/models"):
        route = resolve(path)
        assert route is not None and route.provider == Provider.OPENAI


def test_the_registry_collects_the_header_facts_its_doors_need() -> None:
    assert "anthropic-version" in registry.REGISTRY.fact_headers
    headers = CIMultiDict({"Anthropic-Version": "2023-06-01", "x-api-key": "k"})
    assert registry.header_facts(headers) == MARKED
    assert registry.header_facts(CIMultiDict({"Authorization": "Bearer k"})) == frozenset()


def test_the_marked_doors_come_before_every_prefix() -> None:
    tiers = [door.tier for door, _ in registry.REGISTRY.doors]
    assert tiers == sorted(tiers) and tiers[0] is Tier.MARKED
    assert [provider.name for door, provider in registry.REGISTRY.doors if door.tier is Tier.MARKED] == [
        "anthropic",
        "anthropic",
    ]
    assert registry.api_named("messages") is SPEC and registry.chains_responses("messages")


def test_both_key_headers_are_read_and_two_keys_conflict() -> None:
    query: CIMultiDict[str] = CIMultiDict()
    assert credentials.read(PROVIDER.name, CIMultiDict({"x-api-key": "k1"}), query).key == "k1"
    assert credentials.read(PROVIDER.name, CIMultiDict({"Authorization": "Bearer k1"}), query).key == "k1"
    same = CIMultiDict({"Authorization": "Bearer k1", "x-api-key": "k1"})
    assert credentials.read(PROVIDER.name, same, query).key == "k1"
    both = credentials.read(PROVIDER.name, CIMultiDict({"Authorization": "Bearer k1", "x-api-key": "k2"}), query)
    assert both.key is None and both.conflict == ("Authorization", "x-api-key")


def test_other_providers_key_headers_are_dropped_and_x_api_key_only_elsewhere() -> None:
    headers = CIMultiDict({"x-api-key": "a", "api-key": "b", "x-goog-api-key": "c", "Authorization": "Bearer a"})
    credentials.drop_unread(PROVIDER.name, headers)
    assert sorted(headers) == ["Authorization", "x-api-key"]
    openai = CIMultiDict({"x-api-key": "a", "Authorization": "Bearer o"})
    credentials.drop_unread(Provider.OPENAI, openai)
    assert list(openai) == ["Authorization"]
    route = resolve("/v1/messages", facts=MARKED)
    assert route is not None and raw_target(route, "/v1/messages?key=g&beta=true") == "/v1/messages?beta=true"


def test_the_proxy_s_own_errors_are_anthropic_s() -> None:
    body = error_payload(413, "RunGuard: too large", "request_too_large")
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert "too large" in body["error"]["message"] and orjson.dumps(body)
