"""Gemini's spec: its doors, error format, block status and hooks."""

from __future__ import annotations

import pytest

from runguard.config.settings import GuardSettings
from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.gemini.spec import GEMINI, SPEC, block_status, error_payload
from runguard.proxy.providers.routes import resolve


def test_the_api_and_its_provider() -> None:
    assert (SPEC.name, SPEC.provider, SPEC.operation) == (Api.GEMINI, GEMINI, "generate_content")
    assert isinstance(SPEC.adapter(), GeminiAdapter)
    assert GEMINI.name == Provider.GEMINI and GEMINI.system == "gcp.gemini"
    assert GEMINI.credentials.query == ("key", "$key", "access_token", "oauth_token")


@pytest.mark.parametrize(
    ("status", "name"),
    [(400, "INVALID_ARGUMENT"), (404, "NOT_FOUND"), (413, "INVALID_ARGUMENT"), (502, "UNAVAILABLE"), (599, "UNKNOWN")],
)
def test_the_proxy_s_own_errors_in_gemini_s_shape(status: int, name: str) -> None:
    assert error_payload(status, "m", "code") == {"error": {"code": status, "message": "m", "status": name}}


def test_the_block_status_is_configurable() -> None:
    assert block_status(GuardSettings()) == 429
    assert block_status(GuardSettings(gemini_error_status=400)) == 400


@pytest.mark.parametrize(
    ("path", "gemini_key", "expected"),
    [
        (
            "/gemini/v1beta/models/g:streamGenerateContent",
            False,
            (Api.GEMINI, "/v1beta/models/g:streamGenerateContent", "g", True),
        ),
        ("/v1/models/g:countTokens", False, (Api.OTHER, "/v1/models/g:countTokens", "g", False)),
        ("/v1alpha", False, (Api.OTHER, "/v1alpha", None, False)),
        (
            "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
            False,
            (Api.OTHER, "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent", None, False),
        ),
        ("/v1/models", True, (Api.OTHER, "/v1/models", None, False)),
    ],
)
def test_its_doors(path: str, gemini_key: bool, expected: tuple[object, ...]) -> None:
    route = resolve(path, gemini_key=gemini_key)
    assert route is not None and route.provider == Provider.GEMINI
    assert (route.api, route.upstream_path, route.model, route.stream) == expected


def test_vertex_paths_are_vertex_s_even_with_a_gemini_key() -> None:
    for path in (
        "/v1/projects/p/locations/l/publishers/google/models/g:generateContent",
        "/v1/publishers/google/models/g:generateContent",
    ):
        route = resolve(path, gemini_key=True)
        assert route is not None and route.provider == "vertex"
