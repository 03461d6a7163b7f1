"""OpenAI as an upstream: its doors, credential places, error format and token encodings."""

from __future__ import annotations

import pytest

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.common.openai_provider import OPENAI, encoding, error_payload
from runguard.proxy.providers.routes import resolve


def test_its_names_and_places() -> None:
    assert OPENAI.name == Provider.OPENAI and OPENAI.system == "openai"
    assert OPENAI.credentials.headers == ("Authorization", "api-key")
    assert OPENAI.credentials.query == ()
    assert OPENAI.credentials.subprotocol == "openai-insecure-api-key."


def test_the_error_is_openai_s_shape_with_the_code() -> None:
    assert error_payload(413, "too big", "request_too_large") == {
        "error": {"message": "too big", "type": "runguard_proxy_error", "param": None, "code": "request_too_large"}
    }


@pytest.mark.parametrize(
    ("path", "api_version", "upstream_path", "api"),
    [
        ("/openai/v1/responses", False, "/v1/responses", Api.RESPONSES),  # OpenAI, its prefix named
        ("/openai/v1/responses", True, "/openai/v1/responses", Api.RESPONSES),  # an api-version: Azure's
        ("/openai/deployments/d/chat/completions", False, "/openai/deployments/d/chat/completions", Api.CHAT),
        ("/v1/anything", False, "/v1/anything", Api.OTHER),
    ],
)
def test_its_doors(path: str, api_version: bool, upstream_path: str, api: Api) -> None:
    route = resolve(path, api_version=api_version)
    assert route is not None
    assert (route.provider, route.api, route.upstream_path) == (Provider.OPENAI, api, upstream_path)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4.1", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("GPT-3.5-turbo", "cl100k_base"),
        ("gemini-2.5-flash", None),
        ("models/gemini-2.5-pro", None),
        ("some-new-model", "o200k_base"),
    ],
)
def test_encoding_of_a_model(model: str, expected: str | None) -> None:
    assert encoding(model) == expected
