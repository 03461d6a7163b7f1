"""One run's page: its totals, its breaker (from the shared state, with the reset control and the command
for a shell), its trips, its timeline step by step, and its conversation when bodies were recorded; a run
known only to the live state still has a page, an unknown one gets a 404."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from runguard.proxy.core.ops import Add, Put, Scope
from runguard.proxy.guard import breaker
from runguard.proxy.guard.breaker import BreakerRecord, BreakerState
from runguard.proxy.runs import tenants
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import Record
from tests.proxy.admin.ui.filled import dashboard, fill, page
from tests.proxy.store import factory
from tests.support.dashboard import RUNAWAY, serve_traffic, start_dashboard_proxy
from tests.support.upstream import FakeUpstream


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/ui.db"


async def test_without_recorded_bodies_the_run_page_says_how_to_record_them(
    upstream: FakeUpstream, store_url: str
) -> None:
    running = await start_dashboard_proxy(upstream, store_url, store={"record_bodies": False})
    try:
        await serve_traffic(running, upstream, store_url)
        async with httpx.AsyncClient(base_url=running.url) as http:
            run = (await http.get(f"/runguard/ui/runs/{RUNAWAY}")).text
    finally:
        await running.stop()
    assert "store.record_bodies: true" in run and "RUNGUARD_RECORD_BODIES=1" in run
    assert "partial_parse_error" not in run and "parse_document" in run  # tool names only


async def test_the_timeline_trips_and_breaker_of_a_stopped_run(upstream: FakeUpstream, store_url: str) -> None:
    now = time.time()
    records: list[Record] = [
        factory.request("team-run", 1, at=now - 30, agent="planner", handoff_to="coder"),
        factory.request("team-run", 2, at=now - 20, agent="coder", cached_tokens=0, upstream_ms=250.0),
        factory.request("team-run", 3, at=now - 10, agent="coder", blocked_by="spiral", status=None, upstream_ms=None),
        factory.trip("team-run", detector="spiral", at=now - 10, reason="the same call 3 times", request_index=3),
        factory.trip("team-run", detector="text_loop", action="warn", at=now - 20, request_index=2),
    ]
    await fill(store_url, records)
    state = MemoryState()
    ids = ScopeIds(run=tenants.state_id("kh-test", "team-run"), key="kh-test", key_model="kh-test|m", key_day="d")
    latched = BreakerRecord(BreakerState.OPEN, now - 10, 60.0, 1, "spiral", "the same call 3 times", 3, latched=True)
    await state.execute(ids, [Put(Scope.RUN, breaker.FIELD, latched.dumps()), Add(Scope.RUN, "core.inflight", 1)])
    async with dashboard(upstream.url, store_url, state) as running:
        text = await page(running, "runs/team-run")
    assert "Breaker: <strong" in text and ">open</strong>" in text and "<dd>the same call 3 times</dd>" in text
    assert 'data-reset="/runguard/runs/team-run/reset?tenant=kh-test"' in text
    assert "runguard-proxy reset --tenant kh-test team-run" in text
    assert "<dt>in flight now</dt><dd>1</dd>" in text
    assert "spiral (stopped the run)" in text and "text_loop (warning)" in text
    timeline = text.split("<h2>Timeline</h2>", 1)[1].split("</table>", 1)[0]
    assert "search → hands off to coder" in timeline
    assert "(after planner)</span>" in timeline and "250 ms" in timeline
    assert "<td>blocked: spiral</td>" in timeline and "<td>local</td>" in timeline


async def test_a_run_only_the_live_state_knows_has_its_counters_shown(upstream: FakeUpstream, store_url: str) -> None:
    await fill(store_url, [factory.request("other-run")])
    state = MemoryState()
    ids = ScopeIds(run=tenants.state_id("k_live", "live-only"), key="k_live", key_model="k_live|m", key_day="d")
    await state.execute(ids, [Add(Scope.RUN, "core.requests", 3), Put(Scope.RUN, "core.usd", "0.5")])
    async with dashboard(upstream.url, store_url, state) as running:
        text = await page(running, "runs/live-only")
        async with httpx.AsyncClient(base_url=running.url) as http:
            missing = await http.get("/runguard/ui/runs/no-such-run")
    assert "Nothing recorded yet." in text and "<dt>requests</dt><dd>3</dd>" in text and "<dd>0.5</dd>" in text
    assert "Breaker: <strong" in text and ">closed</strong>" in text
    assert missing.status_code == 404 and "No run &#x27;no-such-run&#x27;" in missing.text
