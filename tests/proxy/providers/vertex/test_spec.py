from __future__ import annotations

import pytest
from multidict import CIMultiDict

from runguard.proxy.core.events import Api
from runguard.proxy.providers import credentials
from runguard.proxy.providers.routes import resolve
from runguard.proxy.providers.vertex.spec import PROVIDER

SCOPE = "/projects/acme/locations/us-central1/publishers/google/models/gemini-2.5-flash"


@pytest.mark.parametrize(
    ("path", "api", "stream"),
    [
        (f"/v1beta1{SCOPE}:generateContent", "vertex_gemini", False),
        (f"/v1{SCOPE}:streamGenerateContent", "vertex_gemini", True),
        (f"/v1beta1{SCOPE}:countTokens", Api.OTHER, False),
        (
            "/v1/projects/acme/locations/global/publishers/google/models/gemini-2.5-pro:generateContent",
            "vertex_gemini",
            False,
        ),
        ("/v1beta1/publishers/google/models/gemini-2.5-flash:streamGenerateContent", "vertex_gemini", True),
        ("/v1/publishers/google/models/gemini-2.5-flash:generateContent", "vertex_gemini", False),
        ("/v1beta1/projects/acme/locations/us-central1/cachedContents", Api.OTHER, False),
    ],
)
def test_its_gemini_paths(path: str, api: str, stream: bool) -> None:
    route = resolve(path)
    assert route is not None and route.provider == "vertex"
    assert (route.api, route.stream, route.upstream_path, route.dialect) == (api, stream, path, "vertex")


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",  # OpenAI's
        "/v1beta/models/gemini-2.5-flash:generateContent",  # the Gemini Developer API's
        "/v1/models",
    ],
)
def test_it_leaves_other_providers_paths_alone(path: str) -> None:
    route = resolve(path, gemini_key=True)
    assert route is not None and route.provider != "vertex"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/projects/acme/locations/evil.example.com/publishers/google/models/g:generateContent",
        "/v1/projects/ACME/locations/us-central1/publishers/google/models/g:generateContent",
        "/v1beta1/projects",
        "/projects/acme/locations/us-central1/publishers/google/models/g:generateContent",  # no SDK sends it
    ],
)
def test_paths_it_refuses(path: str) -> None:
    assert resolve(path) is None and resolve(path, gemini_key=True) is None


def test_it_reads_oauth_tokens_and_express_keys_and_drops_foreign_keys() -> None:
    headers = CIMultiDict({"Authorization": "Bearer ya29.token", "x-api-key": "sk-ant-stray", "api-key": "azure"})
    assert credentials.read(PROVIDER.name, headers, CIMultiDict()).key == "ya29.token"
    credentials.drop_unread(PROVIDER.name, headers)
    assert set(headers) == {"Authorization"}
    express = CIMultiDict({"x-goog-api-key": "AIza-express"})
    assert credentials.read(PROVIDER.name, express, CIMultiDict()).key == "AIza-express"


def test_its_account_is_the_project_its_path_names() -> None:
    assert PROVIDER.account is not None
    assert PROVIDER.account(f"/v1beta1{SCOPE}:generateContent") == "acme"
    assert PROVIDER.account("/v1beta1/publishers/google/models/g:generateContent") is None
