"""The registry: one spec per API, the tables built from them, and the lookups the core asks."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from runguard.config.settings import GuardSettings
from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers import gemini, openai_chat, openai_responses, registry
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from runguard.proxy.providers.spec import Door, ProviderSpec, Tier, UpstreamSetting


def test_the_built_in_apis_in_their_order_and_their_providers_once_each() -> None:
    assert [spec.name for spec in registry.APIS] == [
        "chat",
        "responses",
        "gemini",
        "messages",
        "vertex_gemini",
        "vertex_claude",
    ]
    assert [spec.name for spec in registry.REGISTRY.providers] == ["openai", "gemini", "anthropic", "vertex"]
    assert registry.api_named("responses") is openai_responses.SPEC
    assert registry.provider_named(Provider.GEMINI) is gemini.SPEC.provider
    assert registry.api_named(Api.OTHER) is None and registry.api_named(Api.REALTIME) is None
    assert registry.provider_named("nobody") is None and registry.provider_named(None) is None


def test_an_adapter_is_fresh_each_time_and_none_for_apis_only_counted() -> None:
    assert isinstance(registry.adapter_for(Api.CHAT), ChatAdapter)
    assert isinstance(registry.adapter_for("responses"), ResponsesAdapter)
    assert isinstance(registry.adapter_for(Api.GEMINI), GeminiAdapter)
    assert registry.adapter_for(Api.CHAT) is not registry.adapter_for(Api.CHAT)
    assert registry.adapter_for(Api.OTHER) is None


def test_each_adapter_names_the_api_and_provider_of_its_spec() -> None:
    for spec in registry.APIS:
        adapter = spec.adapter()
        assert (adapter.api, adapter.provider) == (spec.name, spec.provider.name)


def test_the_doors_are_one_table_ordered_by_tier_then_by_spec() -> None:
    tiers = [door.tier for door, _ in registry.REGISTRY.doors]
    assert tiers == sorted(tiers)
    prefixes = [(provider.name, door.pattern.pattern) for door, provider in registry.REGISTRY.doors[:6]]
    assert prefixes == [
        ("anthropic", "^/anthropic(?:/|$)"),  # Tier.MARKED: before every prefix
        ("anthropic", "^/"),  # with `anthropic-version`, whatever the path
        ("openai", "^/openai/"),
        ("openai", "^/openai/v1/"),
        ("openai", "^/openai/"),
        ("gemini", "^/gemini/"),
    ]
    assert registry.REGISTRY.doors[-1][1].name == "openai"  # bare /v1/ is OpenAI's when nothing else claims it


def test_paths_of_a_family_come_from_every_spec_that_reads_it() -> None:
    assert [spec.name for _, spec in registry.REGISTRY.paths("gemini")] == ["chat", "gemini"]
    assert [spec.name for _, spec in registry.REGISTRY.paths("azure")] == ["chat", "responses"]
    assert registry.REGISTRY.paths("nobody") == ()


def test_credential_places_of_every_provider_are_known_together() -> None:
    assert registry.REGISTRY.key_headers == ("api-key", "x-goog-api-key", "x-api-key")
    assert registry.REGISTRY.query_names == {"key", "$key", "access_token", "oauth_token"}


def test_block_status_and_response_chaining_come_from_the_specs() -> None:
    assert registry.block_status(Provider.OPENAI, GuardSettings(gemini_error_status=400)) == 429
    assert registry.block_status(Provider.GEMINI, GuardSettings(gemini_error_status=400)) == 400
    assert registry.block_status(Provider.GEMINI, GuardSettings()) == 429
    assert registry.block_status("nobody", GuardSettings(gemini_error_status=400)) == 429
    assert [registry.chains_responses(name) for name in ("chat", "responses", "gemini", "other")] == [
        False,
        True,
        False,
        False,
    ]


def test_two_specs_of_one_api_or_two_providers_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two specs name the API 'chat'"):
        registry.Registry((openai_chat.SPEC, replace(openai_responses.SPEC, name=Api.CHAT)))
    other_openai = ProviderSpec(
        Provider.OPENAI, gemini.SPEC.provider.upstream, gemini.SPEC.provider.credentials, (), dict
    )
    with pytest.raises(ValueError, match="two provider specs are named 'openai'"):
        registry.Registry((openai_chat.SPEC, replace(gemini.SPEC, provider=other_openai)))


def test_a_registry_of_one_api_routes_only_its_doors() -> None:
    alone = registry.Registry((gemini.SPEC,))
    assert [provider.name for _, provider in alone.doors] == ["gemini"] * len(gemini.SPEC.provider.doors)
    assert alone.key_headers == ("x-goog-api-key", "x-api-key")
    assert Door(re.compile("x"), "f").tier is Tier.NATIVE


def test_an_upstream_variable_the_loader_would_not_read_is_refused() -> None:
    provider = replace(gemini.SPEC.provider, upstream=UpstreamSetting("gemini", "https://g", "GEMINI_URL"))
    with pytest.raises(ValueError, match="must be RUNGUARD_GEMINI_UPSTREAM"):
        registry.Registry((replace(gemini.SPEC, provider=provider),))


@pytest.mark.parametrize(
    ("family", "rest", "lookalike"),
    [
        ("openai", "/v1/Chat/Completions", True),
        ("openai", "/v1/chat/completions \u00a0. ", True),
        ("openai", "/v1/RESPONSES", True),
        ("azure", "/openai/deployments/d/Chat/Completions", True),
        ("gemini", "/v1beta/models/gemini-2.5-flash:GenerateContent", True),
        ("anthropic", "/v1/Messages", True),
        ("openai", "/v1/models", False),
        ("openai", "/v1/chat/completionsx", False),
        ("gemini", "/v1beta/models/gemini-2.5-flash:countTokens", False),
    ],
)
def test_a_guarded_path_in_another_case_or_with_trailing_spaces_is_a_lookalike(
    family: str, rest: str, lookalike: bool
) -> None:
    assert registry.REGISTRY.lookalike(family, rest) is lookalike


def test_the_readme_s_how_it_works_names_every_provider() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    how = readme.partition("## How it works")[2].partition("\n## ")[0]
    assert [p.display for p in registry.REGISTRY.providers if p.display not in how] == []
    assert registry.provider_titles() == "OpenAI, Gemini, Anthropic and Vertex AI"
