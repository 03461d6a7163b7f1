from __future__ import annotations

import pytest

from runguard.proxy.events import Api, Provider
from runguard.proxy.routes import Route, gemini_streams_sse, resolve


@pytest.mark.parametrize(
    ("path", "provider", "api", "upstream_path", "model", "stream"),
    [
        ("/v1/chat/completions", Provider.OPENAI, Api.CHAT, "/v1/chat/completions", None, False),
        ("/v1/responses", Provider.OPENAI, Api.RESPONSES, "/v1/responses", None, False),
        ("/v1/responses/resp_1", Provider.OPENAI, Api.OTHER, "/v1/responses/resp_1", None, False),
        ("/v1/models", Provider.OPENAI, Api.OTHER, "/v1/models", None, False),
        ("/v1/embeddings", Provider.OPENAI, Api.OTHER, "/v1/embeddings", None, False),
        ("/openai/v1/chat/completions", Provider.OPENAI, Api.CHAT, "/v1/chat/completions", None, False),
        (
            "/v1beta/models/gemini-2.5-flash:generateContent",
            Provider.GEMINI,
            Api.GEMINI,
            "/v1beta/models/gemini-2.5-flash:generateContent",
            "gemini-2.5-flash",
            False,
        ),
        (
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            Provider.GEMINI,
            Api.GEMINI,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            "gemini-2.5-flash",
            True,
        ),
        (
            "/v1/models/gemini-2.0-flash:generateContent",
            Provider.GEMINI,
            Api.GEMINI,
            "/v1/models/gemini-2.0-flash:generateContent",
            "gemini-2.0-flash",
            False,
        ),
        (
            "/v1beta/models/gemini-2.5-flash:countTokens",
            Provider.GEMINI,
            Api.OTHER,
            "/v1beta/models/gemini-2.5-flash:countTokens",
            "gemini-2.5-flash",
            False,
        ),
        ("/v1beta/files", Provider.GEMINI, Api.OTHER, "/v1beta/files", None, False),
        ("/upload/v1beta/files", Provider.GEMINI, Api.OTHER, "/upload/v1beta/files", None, False),
        (
            "/gemini/v1beta/models/g:generateContent",
            Provider.GEMINI,
            Api.GEMINI,
            "/v1beta/models/g:generateContent",
            "g",
            False,
        ),
    ],
)
def test_paths_route_to_provider_and_api(
    path: str, provider: Provider, api: Api, upstream_path: str, model: str | None, stream: bool
) -> None:
    route = resolve(path)
    assert route is not None
    assert (route.provider, route.api, route.upstream_path, route.model, route.stream) == (
        provider,
        api,
        upstream_path,
        model,
        stream,
    )


@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/gemini-2.0-flash", "/v1/tunedModels"])
def test_a_bare_v1_path_with_a_gemini_key_is_gemini(path: str) -> None:
    assert resolve(path, gemini_key=True) == Route(Provider.GEMINI, Api.OTHER, path, None)
    assert resolve(path) == Route(Provider.OPENAI, Api.OTHER, path)


@pytest.mark.parametrize("path", ["/", "/favicon.ico", "/v2/chat/completions", "/runguardx"])
def test_unknown_paths_have_no_route(path: str) -> None:
    assert resolve(path) is None


@pytest.mark.parametrize(
    ("query", "sse"),
    [
        ({"alt": "sse"}, True),  # google-genai
        ({"$alt": "sse"}, True),
        ({"alt": "sse", "key": "k"}, True),
        ({}, False),  # one JSON array
        ({"$alt": "json;enum-encoding=int"}, False),  # google-api-core's REST transport
        ({"alt": "json"}, False),
    ],
)
def test_gemini_streams_sse_only_when_alt_sse_is_asked(query: dict[str, str], sse: bool) -> None:
    assert gemini_streams_sse(query) is sse
