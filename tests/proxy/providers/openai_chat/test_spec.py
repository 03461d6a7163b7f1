"""Chat Completions' spec: the paths it reads on each family, its provider and hooks."""

from __future__ import annotations

import pytest

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.common.openai_provider import OPENAI
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_chat.spec import SPEC
from runguard.proxy.providers.routes import resolve


def test_the_api_and_its_hooks() -> None:
    assert (SPEC.name, SPEC.provider, SPEC.operation) == (Api.CHAT, OPENAI, "chat")
    assert isinstance(SPEC.adapter(), ChatAdapter)
    assert SPEC.stream_usage_on_request and not SPEC.chains_responses
    assert SPEC.encoding("gpt-4o") == "o200k_base"


@pytest.mark.parametrize(
    ("path", "provider", "upstream_path"),
    [
        ("/v1/chat/completions", Provider.OPENAI, "/v1/chat/completions"),
        ("/v1/chat/completions/", Provider.OPENAI, "/v1/chat/completions/"),
        ("/openai/deployments/gpt/chat/completions", Provider.OPENAI, "/openai/deployments/gpt/chat/completions"),
        ("/v1beta/openai/chat/completions", Provider.GEMINI, "/v1beta/openai/chat/completions"),
        ("/gemini/v1beta/openai/chat/completions", Provider.GEMINI, "/v1beta/openai/chat/completions"),
    ],
)
def test_every_path_it_reads_is_chat_spoken_in_openai_s_dialect(path: str, provider: str, upstream_path: str) -> None:
    route = resolve(path)
    assert route is not None
    assert (route.provider, route.api, route.upstream_path, route.spec) == (provider, Api.CHAT, upstream_path, SPEC)
    assert route.dialect == Provider.OPENAI


def test_paths_near_its_own_are_not_chat() -> None:
    for path in ("/v1/chat/completions/abc", "/v1/chat", "/v1beta/openai/models"):
        route = resolve(path)
        assert route is not None and route.api == Api.OTHER and route.spec is None
