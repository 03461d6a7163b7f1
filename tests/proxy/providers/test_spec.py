"""Spec values: their defaults are the behaviour of a provider that names nothing more."""

from __future__ import annotations

import re

import pytest

from runguard.config.settings import GuardSettings
from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers import gemini, openai_chat, openai_responses
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.spec import (
    CredentialPlaces,
    Door,
    PathRule,
    ProviderApi,
    ProviderSpec,
    Tier,
    UpstreamSetting,
)

PLAIN = ProviderSpec(
    Provider("plain"),
    UpstreamSetting("plain", "https://plain.example", "RUNGUARD_PLAIN_UPSTREAM"),
    CredentialPlaces(("Authorization",)),
    (Door(re.compile("^/plain/"), "plain", strip="/plain", tier=Tier.PREFIX),),
    lambda status, message, code: {"error": message},
)


def test_a_provider_that_names_nothing_more_blocks_with_429_and_is_its_own_system() -> None:
    assert PLAIN.block_status(GuardSettings(gemini_error_status=400)) == 429
    assert PLAIN.system == "plain"
    assert gemini.SPEC.provider.system == "gcp.gemini"
    assert openai_chat.SPEC.provider.system == "openai"


def test_an_api_that_names_nothing_more_is_chat_counted_by_characters_and_cannot_be_nudged() -> None:
    spec = ProviderApi(Api("plain"), PLAIN, ChatAdapter, (PathRule("plain", re.compile("/go$")),))
    assert (spec.operation, spec.encoding("gpt-4o"), spec.nudge, spec.chains_responses) == ("chat", None, None, False)


def test_the_built_in_hooks() -> None:
    assert gemini.SPEC.operation == "generate_content"
    assert gemini.SPEC.encoding("gemini-2.5-flash") is None
    assert openai_chat.SPEC.encoding("gpt-4o") == "o200k_base"
    assert openai_chat.SPEC.encoding("gpt-4-turbo") == "cl100k_base"
    assert openai_chat.SPEC.encoding("gemini-2.5-flash") is None  # Gemini's OpenAI-compatible Chat
    assert openai_responses.SPEC.chains_responses
    assert all(spec.nudge is not None for spec in (gemini.SPEC, openai_chat.SPEC, openai_responses.SPEC))


def test_error_payloads_are_each_provider_s_shape() -> None:
    assert openai_chat.SPEC.provider.error_payload(404, "no", "unknown_path") == {
        "error": {"message": "no", "type": "runguard_proxy_error", "param": None, "code": "unknown_path"}
    }
    assert gemini.SPEC.provider.error_payload(504, "slow", "upstream_timeout") == {
        "error": {"code": 504, "message": "slow", "status": "DEADLINE_EXCEEDED"}
    }
    assert gemini.SPEC.provider.error_payload(418, "odd", "x") == {
        "error": {"code": 418, "message": "odd", "status": "UNKNOWN"}
    }


def test_upstream_settings_keep_the_documented_env_contract() -> None:
    assert openai_chat.SPEC.provider.upstream == UpstreamSetting(
        "openai", "https://api.openai.com", "RUNGUARD_OPENAI_UPSTREAM"
    )
    assert gemini.SPEC.provider.upstream == UpstreamSetting(
        "gemini", "https://generativelanguage.googleapis.com", "RUNGUARD_GEMINI_UPSTREAM"
    )


@pytest.mark.parametrize(
    ("pattern", "flags", "lead"),
    [
        (r"^/openai/v1/", 0, "/openai/v1/"),
        (r"^/v1(?:beta|alpha)(?:/|$)", 0, "/v1"),
        (r"^/v1?x", 0, "/v"),  # the quantified character is not required
        (r"^/a\.b", 0, "/a"),
        (r"^/a|/b", 0, ""),  # the second branch is not anchored
        (r"^/a(?:x|y)", 0, "/a"),
        (r"^/a[|]b", 0, "/a"),
        (r"/chat/completions/*$", 0, ""),
        (r"^/openai/", re.IGNORECASE, ""),
    ],
)
def test_a_door_s_lead_is_text_every_path_it_matches_starts_with(pattern: str, flags: int, lead: str) -> None:
    door = Door(re.compile(pattern, flags), "f")
    assert door.lead == lead
    for path in ("/openai/v1/x", "/v1beta/x", "/vx", "/a.b", "/b", "/ax", "/a|b", "/OPENAI/x", "/x/chat/completions"):
        if door.pattern.search(path):
            assert path.startswith(door.lead)
