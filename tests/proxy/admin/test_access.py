"""Which Host and Origin names the admin routes answer to (the middleware itself: tests/e2e/test_trust_admin.py)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from runguard.config.settings import ServerSettings
from runguard.proxy.admin.access import admin_denial, names_this_proxy

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
