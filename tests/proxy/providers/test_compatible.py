from __future__ import annotations

import pytest

from runguard.proxy.providers.compatible import named, route

NAMES = {"groq": object(), "local-vllm": object()}


def test_a_path_under_a_configured_name_is_that_upstream_s() -> None:
    assert named("/groq/v1/chat/completions", NAMES) == "groq"
    assert named("/local-vllm/v1/responses", NAMES) == "local-vllm"
    assert named("/v1/chat/completions", NAMES) is None
    assert named("/groqx/v1/chat/completions", NAMES) is None
    assert named("/", NAMES) is None and named("/groq/v1/chat/completions", {}) is None


@pytest.mark.parametrize(
    ("path", "api", "upstream_path"),
    [
        ("/groq/v1/chat/completions", "chat", "/v1/chat/completions"),
        ("/groq/v1/responses", "responses", "/v1/responses"),
        ("/groq/v1/models", "other", "/v1/models"),
    ],
)
def test_it_is_openai_s_route_of_the_rest_sent_to_the_named_upstream(path: str, api: str, upstream_path: str) -> None:
    found = route("groq", path)
    assert found is not None
    assert (found.provider, found.api, found.upstream_path, found.dialect) == (
        "groq",
        api,
        upstream_path,
        "groq" if api == "other" else "openai",
    )


@pytest.mark.parametrize(
    "path",
    [
        "/groq",
        "/groq/v1beta/models/g:generateContent",
        "/groq/v1/projects/p/locations/l/x",
        "/groq/anthropic/v1/messages",
    ],
)
def test_nothing_under_the_prefix_goes_to_another_provider(path: str) -> None:
    assert route("groq", path) is None
