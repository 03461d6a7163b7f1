from __future__ import annotations

import pytest

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.paths import canonical
from runguard.proxy.providers.routes import Route, raw_target, resolve


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
        ("/v1beta/openai/chat/completions", Provider.GEMINI, Api.CHAT, "/v1beta/openai/chat/completions", None, False),
        ("/v1beta/openai/models", Provider.GEMINI, Api.OTHER, "/v1beta/openai/models", None, False),
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


@pytest.mark.parametrize(
    ("path", "api_version", "api"),
    [
        ("/openai/deployments/prod/chat/completions", True, Api.CHAT),
        ("/openai/deployments/prod/chat/completions", False, Api.CHAT),  # named by its path alone
        ("/openai/responses", True, Api.RESPONSES),
        ("/openai/responses", False, Api.RESPONSES),  # OpenAI serves nothing under /openai but /openai/v1
        ("/openai/v1/responses", True, Api.RESPONSES),
        ("/openai/deployments/prod/embeddings", True, Api.OTHER),
        ("/openai/responses/resp_1", True, Api.OTHER),
    ],
)
def test_azure_openai_paths_keep_their_prefix_upstream(path: str, api_version: bool, api: Api) -> None:
    route = resolve(path, api_version=api_version)
    assert route == Route(Provider.OPENAI, api, path)
    assert raw_target(route, path + "?api-version=2024-10-21") == path + "?api-version=2024-10-21"


def test_an_explicit_prefix_is_dropped_from_the_raw_target_as_sent() -> None:
    route = resolve("/openai/v1/files/a b")
    assert route is not None and route.upstream_path == "/v1/files/a b"
    assert raw_target(route, "/openai/v1/files/a%20b?purpose=x") == "/v1/files/a%20b?purpose=x"
    gemini = resolve("/gemini/v1beta/models/g:generateContent")
    assert gemini is not None
    assert raw_target(gemini, "/gemini/v1beta/models/g:generateContent?alt=sse") == (
        "/v1beta/models/g:generateContent?alt=sse"
    )


@pytest.mark.parametrize(
    ("raw", "target"),
    [
        ("/v1//chat/completions", "/v1/chat/completions"),
        ("/v1/models/../chat/completions?x=%2e", "/v1/chat/completions?x=%2e"),
        ("/gemini//v1beta/models/g:generateContent/?alt=sse", "/v1beta/models/g:generateContent?alt=sse"),
        ("/v1beta/models/g%3AgenerateContent", "/v1beta/models/g:generateContent"),
    ],
)
def test_the_target_sent_upstream_is_the_path_routed_whatever_its_spelling(raw: str, target: str) -> None:
    path = canonical(raw)
    assert path is not None
    route = resolve(path)
    assert route is not None and route.api is not Api.OTHER
    assert raw_target(route, raw) == target


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/favicon.ico",
        "/v2/chat/completions",
        "/runguardx",
        # Vertex AI paths whose location is no host name: nobody's (and never OpenAI's upstream).
        "/v1/projects/p/locations/evil.example.com/publishers/google/models/gemini-2.5-flash:generateContent",
        "/v1beta1/projects/p/locations/US-CENTRAL1/publishers/google/models/gemini-2.5-flash:generateContent",
        "/v1/publishers",
    ],
)
def test_unknown_paths_have_no_route(path: str) -> None:
    assert resolve(path) is None
    assert resolve(path, gemini_key=True) is None


def test_chat_and_responses_answer_errors_in_openai_s_format_whoever_serves_them() -> None:
    assert [route.dialect for route in (resolve("/v1beta/openai/chat/completions"), resolve("/v1/responses"))] == [
        Provider.OPENAI,
        Provider.OPENAI,
    ]
    assert [route.dialect for route in (resolve("/v1beta/openai/models"), resolve("/v1beta/models"))] == [
        Provider.GEMINI,
        Provider.GEMINI,
    ]
