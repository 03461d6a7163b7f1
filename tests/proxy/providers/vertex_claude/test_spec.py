from __future__ import annotations

import pytest

from runguard.proxy.core.events import Api
from runguard.proxy.providers.routes import resolve

MODELS = "/projects/acme/locations/us-east5/publishers/anthropic/models"


@pytest.mark.parametrize("version", ["", "/v1", "/v1beta1"])
@pytest.mark.parametrize("method", ["rawPredict", "streamRawPredict"])
def test_claude_on_vertex_is_read_as_messages_and_sent_to_vertex(version: str, method: str) -> None:
    path = f"{version}{MODELS}/claude-haiku-4-5@20251001:{method}"
    route = resolve(path)
    assert route is not None
    assert (route.provider, route.api, route.dialect) == ("vertex", "vertex_claude", "anthropic")
    # Never read as a JSON-array stream: the body says whether it streams, and the answer is SSE.
    assert route.model == "claude-haiku-4-5@20251001" and not route.stream


@pytest.mark.parametrize("version", ["", "/v1"])
def test_its_token_count_is_forwarded_and_only_counted(version: str) -> None:
    route = resolve(f"{version}{MODELS}/count-tokens:rawPredict")
    assert route is not None and route.provider == "vertex" and route.api == Api.OTHER


def test_a_claude_path_with_anthropic_version_still_goes_to_anthropic_s_api() -> None:
    """A request that carries `anthropic-version` is Anthropic's first-party API's, whatever its path."""
    route = resolve(f"/v1{MODELS}/claude-haiku-4-5:rawPredict", facts={"header:anthropic-version"})
    assert route is not None and route.provider == "anthropic"
