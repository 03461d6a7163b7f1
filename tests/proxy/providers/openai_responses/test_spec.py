"""Responses' spec: the paths it reads, its provider and hooks."""

from __future__ import annotations

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.common.openai_provider import OPENAI
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
