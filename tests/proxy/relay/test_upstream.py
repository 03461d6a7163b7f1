from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest

from runguard.config.loader import ConfigError
from runguard.config.settings import UpstreamSettings
from runguard.proxy.core.events import Provider
from runguard.proxy.relay.upstream import Upstream, Upstreams, describe
from tests.support import raw_http
from tests.support.proxy import settings_for, start_proxy


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


@contextlib.asynccontextmanager
async def malformed_upstream() -> AsyncIterator[int]:
    """An upstream that answers every request with a head aiohttp cannot parse; yields its port."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nBad Header Line\x01\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


SECRETS = ("AT-s3cret-0001", "OT-s3cret-0002", "DK-s3cret-0003")


@pytest.mark.parametrize(
    "target",
    [
        f"/v1beta/models/gemini-2.5-flash:generateContent?access_token={SECRETS[0]}",
        f"/v1/chat/completions?oauth_token={SECRETS[1]}",
        f"/v1/models?%24key={SECRETS[2]}&alt=json",  # forwarded untouched
        f"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&%24key={SECRETS[2]}",
    ],
)
async def test_a_malformed_upstream_response_echoes_no_query_credential_nor_the_upstream_address(target: str) -> None:
    async with malformed_upstream() as port:
        running = await start_proxy(settings_for(f"http://127.0.0.1:{port}"))
        try:
            body = b'{"model": "gpt-4o-mini", "messages": [], "contents": []}'
            method = "GET" if "/models?" in target else "POST"
            reply = await raw_http.request(running.url, method, target, body if method == "POST" else b"")
        finally:
            await running.stop()
    assert reply.status == 502
    text = reply.body.decode()
    assert "malformed" in text and "Invalid header token" in text  # says what went wrong
    for secret in SECRETS:
        assert secret not in text
    assert str(port) not in text and "127.0.0.1" not in text


def test_an_error_s_text_loses_its_urls() -> None:
    quoted = aiohttp.ServerDisconnectedError("gone from http://10.0.0.7:9000/v1/x?access_token=abc")
    assert describe(quoted) == "ServerDisconnectedError: gone from <url>"


async def test_vertex_requests_go_to_the_region_their_path_names_unless_one_host_is_configured() -> None:
    path = "/v1beta1/projects/p/locations/europe-west4/publishers/google/models/g:generateContent"
    upstreams = Upstreams(UpstreamSettings())
    assert str(upstreams[Provider("vertex")].url(path)) == "https://europe-west4-aiplatform.googleapis.com" + path
    fake = Upstreams(UpstreamSettings(others={"vertex": "http://127.0.0.1:9"}))  # RUNGUARD_VERTEX_UPSTREAM
    assert str(fake[Provider("vertex")].url(path)) == "http://127.0.0.1:9" + path
    await upstreams.close()
    await fake.close()
