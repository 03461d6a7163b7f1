from __future__ import annotations

import re

import pytest
from yarl import URL

from runguard.proxy.providers.vertex.paths import DEFAULT_BASE, project, upstream_url

GEMINI = "/publishers/google/models/gemini-2.5-flash:generateContent"


@pytest.mark.parametrize(
    ("target", "url"),
    [
        (
            f"/v1beta1/projects/p/locations/us-central1{GEMINI}",
            f"https://us-central1-aiplatform.googleapis.com/v1beta1/projects/p/locations/us-central1{GEMINI}",
        ),
        (
            f"/v1/projects/p/locations/europe-west4{GEMINI}?alt=sse",
            f"https://europe-west4-aiplatform.googleapis.com/v1/projects/p/locations/europe-west4{GEMINI}?alt=sse",
        ),
        (
            f"/v1/projects/p/locations/global{GEMINI}",
            f"https://aiplatform.googleapis.com/v1/projects/p/locations/global{GEMINI}",
        ),
        (f"/v1beta1{GEMINI}", f"https://aiplatform.googleapis.com/v1beta1{GEMINI}"),  # express mode
        (
            f"/v1/projects/p/locations/eu{GEMINI}",
            f"https://aiplatform.eu.rep.googleapis.com/v1/projects/p/locations/eu{GEMINI}",
        ),
        (
            "/projects/p/locations/us-east5/publishers/anthropic/models/c@1:rawPredict",
            "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/anthropic/models/c@1:rawPredict",
        ),
    ],
)
def test_the_default_upstream_is_the_host_the_path_implies(target: str, url: str) -> None:
    assert upstream_url(DEFAULT_BASE, target) == url


def test_a_configured_upstream_takes_every_path_and_v1_comes_back() -> None:
    assert upstream_url("http://127.0.0.1:9", f"/v1/projects/p/locations/us-central1{GEMINI}") == (
        f"http://127.0.0.1:9/v1/projects/p/locations/us-central1{GEMINI}"
    )
    assert upstream_url("http://fake", "/projects/p/locations/l/x") == "http://fake/v1/projects/p/locations/l/x"


@pytest.mark.parametrize("location", ["evil.example.com", "us-central1@evil", "US", "a/b", "x:1"])
def test_a_location_that_is_no_region_never_becomes_a_host(location: str) -> None:
    url = URL(upstream_url(DEFAULT_BASE, f"/v1/projects/p/locations/{location}{GEMINI}"), encoded=True)
    assert url.scheme == "https" and url.port == 443  # nothing the client wrote becomes a host, a port or a user
    assert url.user is None
    assert re.fullmatch(r"(?:[a-z][a-z0-9-]*-)?aiplatform\.(?:[a-z]+\.rep\.)?googleapis\.com", url.host or "")


def test_the_project_a_path_names() -> None:
    assert project(f"/v1/projects/acme-1/locations/us-central1{GEMINI}") == "acme-1"
    assert project("/projects/acme/locations/us-east5/publishers/anthropic/models/c:rawPredict") == "acme"
    assert project(f"/v1beta1{GEMINI}") is None
    assert project(f"/v1/projects/Acme/locations/us-central1{GEMINI}") is None
