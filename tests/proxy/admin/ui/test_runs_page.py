"""The runs list: filters by status, key, detector and activity (a bad one is named, not an error), pages of
50 that keep the filters, and a page that refreshes itself while it shows a live run."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx
import pytest

from runguard.proxy.admin.ui.runs_page import BadFilter, page_number, seconds
from runguard.proxy.store import QueueSink
from runguard.proxy.store.records import Record
from tests.e2e import agents
from tests.proxy.admin.ui.filled import dashboard, fill, page
from tests.proxy.store import factory
from tests.support.dashboard import sdk, start_dashboard_proxy
from tests.support.upstream import FakeUpstream


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/ui.db"


async def test_the_runs_list_pages_and_keeps_its_filters(upstream: FakeUpstream, store_url: str) -> None:
    sink = QueueSink(store_url, flush_interval=0.02)
    sink.start()
    for n in range(120):
        key = "kh-b" if n % 2 else "kh-a"
        sink.submit(factory.request(f"paged-{n:03d}", 1, at=time.time() - 1000 + n, key_hash=key, tool_calls=()))
    await sink.flush()
    await sink.close()
    running = await start_dashboard_proxy(upstream, store_url)
    try:
        async with httpx.AsyncClient(base_url=running.url) as http:
            first = (await http.get("/runguard/ui/runs", params={"key": "kh-a"})).text
            second = (await http.get("/runguard/ui/runs", params={"key": "kh-a", "page": "2"})).text
            everything = (await http.get("/runguard/ui/runs", params={"page": "3"})).text
    finally:
        await running.stop()
    assert "paged-118" in first and "paged-020" in first and "paged-018" not in first  # 50 of kh-a's 60, newest first
    assert 'href="/runguard/ui/runs?key=kh-a&amp;page=2" rel="next"' in first
    assert "paged-018" in second and "paged-000" in second and 'rel="next"' not in second and "paged-001" not in second
    assert 'rel="prev"' in everything and "paged-019" in everything and 'rel="next"' not in everything


async def test_the_runs_list_refreshes_itself_while_a_run_is_live(upstream: FakeUpstream, store_url: str) -> None:
    running = await start_dashboard_proxy(upstream, store_url)
    try:
        async with httpx.AsyncClient(base_url=running.url) as http:
            assert 'http-equiv="refresh"' not in (await http.get("/runguard/ui/runs")).text
            upstream.script = agents.chat_script(steps=3)
            client = sdk(running.url, "live-run")
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
            await client.close()  # the answer asked for a tool: the run goes on
            for _ in range(100):
                page = (await http.get("/runguard/ui/runs")).text
                if "live-run" in page:
                    break
                await asyncio.sleep(0.05)
    finally:
        await running.stop()
    assert "badge-running" in page and '<meta http-equiv="refresh" content="5">' in page


@pytest.mark.parametrize(
    ("duration", "expected"), [("", None), ("30m", 1800.0), ("24h", 86400.0), ("7d", 604800.0), ("90", 90.0)]
)
def test_activity_windows_read_as_seconds(duration: str, expected: float | None) -> None:
    assert seconds(duration) == expected


@pytest.mark.parametrize(
    ("duration", "problem"),
    [("yesterday", "expected a duration"), ("0h", "must be positive"), ("-1d", "must be positive")],
)
def test_a_window_that_is_no_duration_is_named(duration: str, problem: str) -> None:
    with pytest.raises(BadFilter, match=problem):
        seconds(duration)


@pytest.mark.parametrize(
    ("raw", "number"), [(None, 1), ("3", 3), ("0", 1), ("-4", 1), ("x", 1), ("999999999", 100_000)]
)
def test_page_numbers_are_clamped(raw: str | None, number: int) -> None:
    assert page_number(raw) == number


async def test_filters_by_status_detector_and_activity(upstream: FakeUpstream, store_url: str) -> None:
    now = time.time()
    records: list[Record] = [
        factory.request("done", 1, at=now - 60, tool_calls=(), finish_reason="stop"),
        factory.request("stopped", 1, at=now - 50, blocked_by="spiral"),
        factory.trip("stopped", detector="spiral", at=now - 50),
        factory.request("warned", 1, at=now - 40, tool_calls=(), finish_reason="stop"),
        factory.trip("warned", detector="text_loop", action="warn", at=now - 40),
        factory.request("last-week", 1, at=now - 5 * 86400, tool_calls=(), finish_reason="stop"),
    ]
    await fill(store_url, records)
    async with dashboard(upstream.url, store_url) as running:

        async def listed(**query: str) -> set[str]:
            return set(re.findall(r'class="run-id">([^<]+)</a>', await page(running, "runs", **query)))

        assert await listed() == {"done", "stopped", "warned", "last-week"}
        assert await listed(status="tripped") == {"stopped"}
        assert await listed(status="completed") == {"done", "warned", "last-week"}
        assert await listed(detector="text_loop") == {"warned"}
        assert await listed(since="24h") == {"done", "stopped", "warned"}
        bad = await page(running, "runs", since="yesterday")
        assert "since: expected a duration such as 24h or 7d, got &#x27;yesterday&#x27;" in bad
        assert 'class="run-id"' not in bad
        assert "unknown status &#x27;finished&#x27;" in await page(running, "runs", status="finished")
        kept = await page(running, "runs", detector="gone_detector", since="90m")
        assert '<option value="gone_detector" selected>' in kept and '<option value="90m" selected>' in kept
