"""One figure, one meaning: a trip's estimated cost avoided is the same in every view (issue 36, item 4).

A warning stops nothing and avoids nothing ($0 everywhere: `show` used to print an estimate for it while
`trips` printed $0); a blocking trip's estimate is the run's cost per request times the requests it would most
likely still have made (what stuck sessions its detector stopped went on to make, within its step cap and
budget), and `show`, `trips`,
the admin API, the dashboard and the metric all print that number.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import openai
import orjson
import pytest

from runguard.detectors.budget import BudgetConfig
from runguard.detectors.max_requests import MaxRequestsConfig
from runguard.proxy.store import costs
from tests.e2e import agents
from tests.proxy.cli.views import cli
from tests.support.dashboard import sdk, start_dashboard_proxy
from tests.support.upstream import FakeUpstream


def test_the_estimate() -> None:
    """A stuck run goes on for about T times the requests it made (T fitted per detector on the corpus), not to
    its cap."""
    assert costs.avoided_estimate("block", spent=0.4, index=4, step_cap=100) == pytest.approx(0.1 * 4 * costs.TAIL)
    looping = costs.avoided_estimate("block", spent=0.4, index=4, step_cap=100, detector="text_loop")
    polling = costs.avoided_estimate("block", spent=0.4, index=4, step_cap=100, detector="non_progress")
    assert looping == pytest.approx(0.1 * 4 * 1.1) and polling == pytest.approx(0.1 * 4 * 10.6)
    assert costs.avoided_estimate("block", spent=0.4, index=4, step_cap=6) == pytest.approx(0.1 * 2)  # its cap first
    assert costs.avoided_estimate("warn", spent=0.4, index=4, step_cap=100) == 0.0
    assert costs.avoided_estimate("block", spent=0.4, index=120, step_cap=100) == 0.0  # past the cap
    assert costs.counted_avoided("warn", 0.0021) == 0.0 and costs.counted_avoided("block", 0.0021) == 0.0021


def test_the_estimate_never_passes_the_run_s_own_budget() -> None:
    """A runaway at $1 a request, stopped at its 4th with a $5 budget, would have been stopped at $5 anyway."""
    assert costs.avoided_estimate("block", spent=4.0, index=4, step_cap=250, budget=5.0) == pytest.approx(1.0)
    assert costs.avoided_estimate("block", spent=2.0, index=4, step_cap=250, budget=5.0) == pytest.approx(3.0)
    assert costs.avoided_estimate("block", spent=6.0, index=4, step_cap=250, budget=5.0) == 0.0
    assert costs.avoided_estimate("block", spent=0.04, index=4, step_cap=100, budget=5.0) == pytest.approx(0.064)


async def test_every_view_shows_the_same_cost_avoided(upstream: FakeUpstream, tmp_path: Path) -> None:
    store_url = f"sqlite+aiosqlite:///{tmp_path}/costs.db"
    running = await start_dashboard_proxy(upstream, store_url)
    try:
        upstream.script = agents.chat_script(steps=50, usage=(4000, 400))
        client = sdk(running.url, "costs-run")
        with pytest.raises(openai.RateLimitError):  # consecutive_same_tool warns at 3, non_progress stops at 4
            await agents.chat_agent(client, agents.soft_error_tool, model="gpt-4o")
        await client.close()
        async with httpx.AsyncClient(base_url=running.url) as http:
            for _ in range(100):  # the records reach the store in batches: wait for the trips and the run's row
                admin = (await http.get("/runguard/runs/costs-run")).json()
                if len(admin.get("trips") or []) == 2 and admin.get("summary") is not None:
                    break
                await asyncio.sleep(0.05)
            metrics = (await http.get("/runguard/metrics")).text
            page = (await http.get("/runguard/ui/runs/costs-run")).text
    finally:
        await running.stop()
    by_detector = {trip["detector"]: trip for trip in admin["trips"]}
    warning, stop = by_detector["consecutive_same_tool"], by_detector["non_progress"]
    assert warning["action"] == "warn" and warning["usd_avoided"] == 0.0
    estimate = stop["usd_avoided"]
    cap, budget = MaxRequestsConfig().limit, BudgetConfig().run_usd
    spent, index = stop["usd_so_far"], stop["request_index"]
    assert estimate == pytest.approx(costs.avoided_estimate("block", spent, index, cap, budget, "non_progress"))
    assert estimate > 0 and admin["summary"]["usd_avoided"] == pytest.approx(estimate)
    shown = orjson.loads((await cli("show", "costs-run", "--json", database_url=store_url)).stdout)
    assert {t["detector"]: t["usd_avoided"] for t in shown["trips"]} == {
        "consecutive_same_tool": 0.0,
        "non_progress": pytest.approx(estimate),
    }
    listed = orjson.loads((await cli("trips", "--json", database_url=store_url)).stdout)
    assert {t["detector"]: t["usd_avoided"] for t in listed} == shown_avoided(shown)
    assert f'runguard_usd_avoided_total{{detector="non_progress"}} {estimate}' in metrics
    assert 'runguard_usd_avoided_total{detector="consecutive_same_tool"}' not in metrics
    assert f"${estimate:,.4f}" in page and "$0.0000" in page
    assert "non_progress 10.6x" in page  # the estimate's basis beside it


def shown_avoided(shown: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    return {t["detector"]: pytest.approx(t["usd_avoided"]) for t in shown["trips"]}
