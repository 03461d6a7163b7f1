"""Responses' spec: the paths it reads, its provider and hooks."""

from __future__ import annotations

import pytest

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.openai.provider import OPENAI
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from runguard.proxy.providers.openai_responses.spec import SPEC
from runguard.proxy.providers.routes import resolve


def test_the_api_and_its_hooks() -> None:
    assert (SPEC.name, SPEC.provider, SPEC.operation) == (Api.RESPONSES, OPENAI, "chat")
    assert isinstance(SPEC.adapter(), ResponsesAdapter)
    assert SPEC.chains_responses and not SPEC.stream_usage_on_request


def test_openai_s_and_azure_s_paths() -> None:
    for path, api_version in (("/v1/responses", False), ("/openai/responses", True), ("/openai/v1/responses", False)):
        route = resolve(path, api_version=api_version)
        assert route is not None and (route.provider, route.api, route.spec) == (Provider.OPENAI, Api.RESPONSES, SPEC)


def test_a_response_s_own_path_is_only_counted() -> None:
    route = resolve("/v1/responses/resp_1")
    assert route is not None and (route.api, route.spec) == (Api.OTHER, None)


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ("/v1/responses/resp_1", "resp_1"),
        ("/v1/responses/resp_1/", "resp_1"),
        ("/openai/responses/resp_2", "resp_2"),  # Azure OpenAI's classic path (api-version in the query)
        ("/openai/v1/responses/resp_3", "resp_3"),  # Azure OpenAI's v1 path, with an api-version
        ("/v1/responses/resp_1/input_items", None),
        ("/v1/responses", None),
        ("/openai/deployments/d/responses/resp_1", None),
        ("/v1/chat/completions/chatcmpl_1", None),
    ],
)
def test_a_poll_names_the_response_it_reads(path: str, found: str | None) -> None:
    assert SPEC.polls is not None and SPEC.polls.polled_id(path) == found


def test_its_background_responses_end_in_a_final_status() -> None:
    assert SPEC.polls is not None and {"completed", "failed", "cancelled"} <= SPEC.polls.final
    assert "in_progress" not in SPEC.polls.final
