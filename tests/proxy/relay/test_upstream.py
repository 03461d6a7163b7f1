from __future__ import annotations

import pytest

from runguard.config.loader import ConfigError
from runguard.config.settings import UpstreamSettings
from runguard.proxy.core.events import Provider
from runguard.proxy.relay.upstream import Upstream, Upstreams


@pytest.mark.parametrize(
    ("base", "target", "url"),
    [
        ("https://api.openai.com", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"),
        (
            "https://r.openai.azure.com/",
            "/openai/responses?api-version=v",
            "https://r.openai.azure.com/openai/responses?api-version=v",
        ),
        # An Azure endpoint given with its /openai path: its v1 API under it, its classic paths not twice under it.
        (
            "https://r.openai.azure.com/openai",
            "/v1/chat/completions",
            "https://r.openai.azure.com/openai/v1/chat/completions",
        ),
        (
            "https://r.openai.azure.com/openai",
            "/openai/deployments/d/chat/completions?api-version=v",
            "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=v",
        ),
        ("https://gw.example/v2", "/v1/files/a%20b?x=%2F", "https://gw.example/v2/v1/files/a%20b?x=%2F"),
    ],
)
def test_the_upstream_url_is_the_base_and_the_target_as_sent(base: str, target: str, url: str) -> None:
    assert str(Upstream(base, UpstreamSettings()).url(target)) == url


async def test_one_upstream_per_provider_spec_at_its_setting_s_url() -> None:
    upstreams = Upstreams(UpstreamSettings(openai="http://o.example", gemini="http://g.example"))
    try:
        assert upstreams["openai"].base_url == "http://o.example"
        assert upstreams["gemini"].base_url == "http://g.example"
    finally:
        await upstreams.close()


def test_an_upstream_setting_no_provider_has_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match=r"upstreams\.others\.openia: no provider's upstream is named 'openia'"):
        Upstreams(UpstreamSettings(others={"openia": "http://typo.example"}))


async def test_vertex_requests_go_to_the_region_their_path_names_unless_one_host_is_configured() -> None:
    path = "/v1beta1/projects/p/locations/europe-west4/publishers/google/models/g:generateContent"
    upstreams = Upstreams(UpstreamSettings())
    assert str(upstreams[Provider("vertex")].url(path)) == "https://europe-west4-aiplatform.googleapis.com" + path
    fake = Upstreams(UpstreamSettings(others={"vertex": "http://127.0.0.1:9"}))  # RUNGUARD_VERTEX_UPSTREAM
    assert str(fake[Provider("vertex")].url(path)) == "http://127.0.0.1:9" + path
    await upstreams.close()
    await fake.close()
