"""The dashboard's routes over HTTP (no browser): every page served after real traffic, client text escaped on
every page, the admin API's access rules, no store. What one page shows is tested in its own module."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from runguard.proxy.serve.app import create_app
from runguard.proxy.serve.server import start
from tests.support.dashboard import HEALTHY, RUNAWAY, XSS, serve_traffic, start_dashboard_proxy
from tests.support.proxy import settings_for
from tests.support.upstream import FakeUpstream

PAGES = ("/runguard/ui/", "/runguard/ui/runs", "/runguard/ui/trips", "/runguard/ui/keys", "/runguard/ui/detectors")


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/ui.db"


async def test_pages_show_the_runs_the_proxy_served(upstream: FakeUpstream, store_url: str) -> None:
    running = await start_dashboard_proxy(upstream, store_url)
    try:
        await serve_traffic(running, upstream, store_url)
        async with httpx.AsyncClient(base_url=running.url) as http:
            pages = {path: await http.get(path) for path in PAGES}
            assert {path: r.status_code for path, r in pages.items()} == dict.fromkeys(PAGES, 200)
            assert all(r.headers["content-type"].startswith("text/html") for r in pages.values())
            assert "frame-ancestors 'none'" in pages["/runguard/ui/"].headers["content-security-policy"]
            runs = pages["/runguard/ui/runs"].text
            assert HEALTHY in runs and RUNAWAY in runs and "tripped:non_progress" in runs and "completed" in runs
            assert "non_progress" in pages["/runguard/ui/"].text and "Runs live now" in pages["/runguard/ui/"].text
            assert "non_progress" in pages["/runguard/ui/trips"].text
            assert "spend today against its daily budget" in pages["/runguard/ui/keys"].text
            assert all(f'id="{name}"' in pages["/runguard/ui/detectors"].text for name in ("spiral", "budget"))
            run = (await http.get(f"/runguard/ui/runs/{RUNAWAY}")).text
            assert "non_progress (stopped the run)" in run and "partial_parse_error" in run  # the tool's result
            assert "parse_document" in run and "Extract the invoice total." in run  # a call, the user's message
            # The run's state is its tenant's (by default its key's): the reset names the tenant.
            assert re.search(r'data-reset="/runguard/runs/run-runaway-1/reset\?tenant=k_[0-9a-f]{16}"', run)
            assert re.search(r"runguard-proxy reset --tenant k_[0-9a-f]{16} run-runaway-1", run)  # without script
            only_tripped = (await http.get("/runguard/ui/runs", params={"status": "tripped"})).text
            assert RUNAWAY in only_tripped and HEALTHY not in only_tripped
            by_detector = (await http.get("/runguard/ui/runs", params={"detector": "non_progress"})).text
            assert RUNAWAY in by_detector and HEALTHY not in by_detector
            assert (await http.get("/runguard/ui/runs/no-such-run")).status_code == 404
            assert (await http.get("/runguard/ui/static/ui.css")).headers["content-type"].startswith("text/css")
            assert (await http.get("/runguard/ui", follow_redirects=False)).status_code == 302
    finally:
        await running.stop()


async def test_client_chosen_text_is_escaped_on_every_page(upstream: FakeUpstream, store_url: str) -> None:
    """The X-Run-Id of one run is markup: no page may carry it as markup, each shows it as text."""
    running = await start_dashboard_proxy(upstream, store_url)
    try:
        await serve_traffic(running, upstream, store_url)
        async with httpx.AsyncClient(base_url=running.url) as http:
            pages = [(await http.get(path)).text for path in PAGES]
            detail = await http.get(f"/runguard/ui/runs/{quote(XSS, safe='')}")
            assert detail.status_code == 200
            pages.append(detail.text)
    finally:
        await running.stop()
    for text in pages:
        assert "<script>alert" not in text and "<img src=x" not in text
    assert html.escape(XSS, quote=True) in pages[1]  # the runs list shows it, as text
    assert html.escape(XSS, quote=True) in pages[-1]


async def test_the_dashboard_follows_the_admin_api_s_access_rules(upstream: FakeUpstream, tmp_path: Path) -> None:
    """Bound beyond loopback: refused without a token; with one, only with the token."""
    open_settings = settings_for(upstream.url, server={"host": "0.0.0.0"})
    token_settings = settings_for(upstream.url, server={"host": "0.0.0.0", "admin_token": "s3cret-token"})
    for settings, expected in ((open_settings, 403), (token_settings, 401)):
        running = await start(create_app(settings, detectors=[]), "127.0.0.1", 0, grace=1.0)
        try:
            async with httpx.AsyncClient(base_url=running.url) as http:
                for path in (*PAGES, "/runguard/ui/runs/any", "/runguard/ui/static/ui.js"):
                    response = await http.get(path)
                    assert response.status_code == expected, path
                    assert "RunGuard" not in response.text
                if settings is token_settings:
                    allowed = await http.get("/runguard/ui/detectors", headers={"Authorization": "Bearer s3cret-token"})
                    assert allowed.status_code == 200 and "spiral" not in allowed.text  # detectors=[]: none listed
        finally:
            await running.stop()


async def test_without_a_store_the_pages_say_so(upstream: FakeUpstream) -> None:
    running = await start(create_app(settings_for(upstream.url)), "127.0.0.1", 0, grace=1.0)
    try:
        async with httpx.AsyncClient(base_url=running.url) as http:
            for path in PAGES[:4]:
                response = await http.get(path)
                assert response.status_code == 200 and "No record store is configured" in response.text, path
            assert "spiral" in (await http.get("/runguard/ui/detectors")).text
    finally:
        await running.stop()
