"""The admin API of a real `runguard-proxy serve` on loopback, attacked as a hostile web page would.

A page on another site can make a visitor's browser send a form POST to
127.0.0.1 (any Origin, form-encoded), and with DNS rebinding it can read and
write the admin API under its own name (any Host). Each attack is sent to a
run the proxy has stopped; the run must stay stopped, while the CLI's own
reset, and clients that name the proxy as it is bound, keep working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e import payloads
from tests.e2e.trust import cli, serving
from tests.support.upstream import FakeUpstream, Reply

pytestmark = pytest.mark.slow

STOPPED = {"detectors": {"max_requests": {"limit": 1}}}
TOKEN = "trust-admin-t0ken"


async def _ask(url: str, run_id: str) -> None:
    sdk = openai.AsyncOpenAI(
        base_url=url + "/v1", api_key="sk-trust-admin", max_retries=0, default_headers={"X-Run-Id": run_id}
    )
    async with sdk:
        await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])


async def _stop_run(url: str, run_id: str) -> None:
    """Two requests in a run allowed one: the second is refused and the run's breaker is open."""
    await _ask(url, run_id)
    with pytest.raises(openai.RateLimitError):
        await _ask(url, run_id)


async def _breaker(http: httpx.AsyncClient, url: str, run_id: str, **headers: str) -> str:
    answer = await http.get(f"{url}/runguard/runs/{run_id}", headers=headers)
    assert answer.status_code == 200, answer.text
    state: str = answer.json()["breaker"]["state"]
    return state


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def test_cross_site_posts_and_rebound_names_cannot_reset_a_run(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    async with (
        serving(tmp_path, upstream.url, guard=STOPPED, server={"admin_hosts": ["runguard.internal"]}) as served,
        httpx.AsyncClient() as http,
    ):
        url, port = served.url, _port(served.url)
        await _stop_run(url, "victim")
        reset = f"{url}/runguard/runs/victim/reset"
        attacks: list[tuple[str, dict[str, Any]]] = [
            # An HTML form on another site, auto-submitted: form-encoded, with the page's Origin.
            (
                "cross-site form",
                {
                    "content": b"go=1",
                    "headers": {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"},
                },
            ),
            ("form without Origin", {"content": b"go=1", "headers": {"Content-Type": "text/plain"}}),
            ("JSON from another site", {"json": {}, "headers": {"Origin": "http://evil.example"}}),
            ("JSON from a sandboxed page", {"json": {}, "headers": {"Origin": "null"}}),
            ("DNS rebinding", {"json": {}, "headers": {"Host": f"evil.example:{port}"}}),
            (
                "rebinding, same-origin fetch",
                {"json": {}, "headers": {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}},
            ),
            ("right name, other port", {"json": {}, "headers": {"Host": f"localhost:{port + 1}"}}),
            ("JSON that is not an object", {"content": b"[1]", "headers": {"Content-Type": "application/json"}}),
        ]
        for name, request in attacks:
            answer = await http.post(reset, **request)
            assert answer.status_code in (400, 403, 415), f"{name}: {answer.status_code} {answer.text}"
            assert await _breaker(http, url, "victim") == "open", f"{name} reset the run"
        # Reading is refused under a rebound name too (a rebinding page could read every run otherwise).
        read = await http.get(f"{url}/runguard/runs", headers={"Host": f"evil.example:{port}"})
        assert read.status_code == 403 and "server.admin_hosts" in read.json()["error"]
        metrics = await http.get(f"{url}/runguard/metrics", headers={"Host": f"evil.example:{port}"})
        assert metrics.status_code == 403
        health = await http.get(f"{url}/runguard/health", headers={"Host": f"evil.example:{port}"})
        assert health.status_code == 200  # liveness probes come under any name; it says only ok/degraded

        # The names the proxy is bound to, and the configured one, are served.
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "runguard.internal", f"RunGuard.Internal:{port}"):
            assert await _breaker(http, url, "victim", Host=host) == "open", host
        same_site = await http.get(f"{url}/runguard/runs/victim", headers={"Origin": f"http://localhost:{port}"})
        assert same_site.status_code == 200

        # The CLI resets it (JSON body, the Host its --url names), and the run goes on.
        code, out, err = await cli("reset", "victim", "--url", url)
        assert code == 0, err
        assert "victim reset" in out
        await _ask(url, "victim")


async def test_a_token_guards_every_admin_route_from_loopback_too(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    async with (
        serving(tmp_path, upstream.url, env={"RUNGUARD_ADMIN_TOKEN": TOKEN}, guard=STOPPED) as served,
        httpx.AsyncClient() as http,
    ):
        url = served.url
        await _stop_run(url, "guarded")
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        for method, path in (
            ("GET", "/runguard/runs/guarded"),
            ("GET", "/runguard/trips"),
            ("GET", "/runguard/metrics"),
            ("POST", "/runguard/runs/guarded/reset"),
            ("POST", "/runguard/keys/k_0000/reset"),
        ):
            answer = await http.request(method, url + path, json={} if method == "POST" else None)
            assert answer.status_code == 401, f"{method} {path}: {answer.status_code}"
            assert TOKEN not in answer.text
        # Prometheus sends the token as a bearer token (scrape_config `authorization: {credentials: ...}`).
        scraped = await http.get(url + "/runguard/metrics", headers=bearer)
        assert scraped.status_code == 200 and "runguard_requests_total" in scraped.text
        assert (await http.get(url + "/runguard/health")).status_code == 200
        # The token does not excuse a cross-site request: the browser of a logged-in operator carries none
        # of its own, but a page must not be able to ride on one a proxy in front adds.
        form = await http.post(
            url + "/runguard/runs/guarded/reset",
            content=b"go=1",
            headers={**bearer, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 415
        assert await _breaker(http, url, "guarded", **bearer) == "open"
        code, _, err = await cli("reset", "guarded", "--url", url)
        assert code == 1 and "admin token" in err
        code, out, err = await cli("reset", "guarded", "--url", url, env={"RUNGUARD_ADMIN_TOKEN": TOKEN})
        assert code == 0 and "guarded reset" in out, err
        await _ask(url, "guarded")
