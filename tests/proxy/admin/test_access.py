"""Which Host and Origin names the admin routes answer to, and that every path under `/runguard` is checked
(the admin API attacked: tests/e2e/test_trust_admin.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from runguard.config.settings import ServerSettings
from runguard.proxy.admin.access import admin_denial, names_this_proxy
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream

LOCAL = ("127.0.0.1", 8787)


@pytest.mark.parametrize(
    ("hostname", "port"),
    [
        ("127.0.0.1", 8787),
        ("localhost", 8787),
        ("LOCALHOST", 8787),
        ("localhost.", 8787),
        ("::1", 8787),
        ("127.0.0.2", 8787),  # any loopback address: an IP literal cannot be rebound
        ("runguard.internal", 8787),  # configured without a port: any port
        ("runguard.internal", 443),
        ("gateway", 9000),  # configured with its port
        ("::2", 8787),  # configured as [::2]:8787
    ],
)
def test_names_of_this_proxy(hostname: str, port: int) -> None:
    server = ServerSettings(admin_hosts=("runguard.internal", "gateway:9000", "[::2]:8787"))
    assert names_this_proxy(server, hostname, port, LOCAL)


@pytest.mark.parametrize(
    ("hostname", "port"),
    [
        ("evil.example", 8787),  # DNS rebinding: the attacker's name
        ("localhost", 8788),  # the right name, another port (another service on this machine)
        ("127.0.0.1", 80),
        ("gateway", 9001),
        ("10.0.0.9", 8787),  # an address this connection did not come in on
        ("runguard.internal.evil.example", 8787),
        ("0.0.0.0", 8787),
    ],
)
def test_other_names_are_refused(hostname: str, port: int) -> None:
    server = ServerSettings(admin_hosts=("runguard.internal", "gateway:9000"))
    assert not names_this_proxy(server, hostname, port, LOCAL)


def test_the_address_a_connection_came_in_on_and_the_bind_host() -> None:
    wide = ServerSettings(host="0.0.0.0")
    assert names_this_proxy(wide, "10.0.0.5", 8787, ("10.0.0.5", 8787))  # a scraper that reaches a pod by its IP
    assert not names_this_proxy(wide, "10.0.0.6", 8787, ("10.0.0.5", 8787))
    assert names_this_proxy(wide, "fe80::1", 8787, ("fe80::1%eth0", 8787))  # a scoped IPv6 sockname
    named = ServerSettings(host="proxy.local")
    assert names_this_proxy(named, "proxy.local", 8787, ("192.168.1.4", 8787))


def test_a_token_that_is_not_utf8_is_refused_not_a_crash() -> None:
    refused = admin_denial(ServerSettings(admin_token=SecretStr("t0ken")), "Bearer \udcff\udcfe")  # bytes 0xff 0xfe
    assert refused is not None and refused.status == 401


def _requests_total(exposition: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "runguard_requests_total"
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/runguard/runs"),  # an admin route
        ("GET", "/runguard/metrics"),
        ("GET", "/runguard/ui/"),  # a dashboard page
        ("POST", "/runguard/runs/r/reset"),
        ("OPTIONS", "/runguard/runs"),  # an admin path, a method no admin route has: the catch-all serves it
        ("GET", "/runguard/nothing-here"),  # under /runguard/, no admin route: the catch-all serves it
        ("GET", "/runguard"),
        ("POST", "/runguardish/v1/chat/completions"),  # the prefix without its slash is checked too
    ],
)
async def test_every_path_under_runguard_is_checked_whatever_route_serves_it(
    upstream: FakeUpstream, method: str, path: str
) -> None:
    """A Host that does not name the proxy is refused on every path under `/runguard` (health excepted), before
    any handler runs and without counting a provider request; the same paths named rightly are not refused."""
    running = await start_proxy(settings_for(upstream.url), detectors=[])
    port = urlsplit(running.url).port
    try:
        async with aiohttp.ClientSession() as session:
            async with session.request(method, running.url + path, headers={"Host": f"evil.example:{port}"}) as bad:
                assert bad.status == 403
                assert "do not answer for Host" in (await bad.json())["error"]
            async with session.request(method, running.url + path, json={}) as good:
                assert good.status != 403
            async with session.get(running.url + "/runguard/health", headers={"Host": "evil.example"}) as health:
                assert health.status == 200
            async with session.get(running.url + "/runguard/metrics") as scraped:
                exposition = await scraped.text()
    finally:
        await running.stop()
    counted = 0 if path.startswith("/runguard/") else 1  # named rightly, a path outside `/runguard/` is counted
    assert _requests_total(exposition) == counted
    assert not upstream.received
