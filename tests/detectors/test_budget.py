"""`budget`: the run's USD cap and the API key's daily cap."""

from __future__ import annotations

from runguard.detectors.budget import Budget, BudgetConfig
from runguard.proxy.core.ops import Scope
from tests.detectors.harness import RunSimulator, Step, costing, first_trip, request, shows


async def test_run_budget_stops_the_request_after_spend_reaches_the_cap() -> None:
    sim = RunSimulator([(Budget(), BudgetConfig(run_usd=5.0))])
    results = await sim.run([Step(request(), costing(1.25)) for _ in range(6)])
    # 4 responses spend exactly $5.00; the 5th request is the first to start at the cap.
    assert first_trip(results) == 5
    finding = results[4].one("budget")
    shows(finding, "value", "limit")
    assert finding.action == "block"
    assert "$5.00 budget" in finding.reason
    assert finding.evidence["usd"] == 5.0


async def test_run_under_budget_passes() -> None:
    sim = RunSimulator([Budget()])
    results = await sim.run([Step(request(), costing(0.49)) for _ in range(10)])
    assert first_trip(results) is None


async def test_key_daily_budget_counts_every_run_of_the_key() -> None:
    first = RunSimulator([(Budget(), BudgetConfig(key_daily_usd=1.0))], run_id="run-a")
    second = first.another_run("run-b")
    assert not (await first.step(Step(request(), costing(0.6)))).tripped()
    assert not (await second.step(Step(request(), costing(0.6)))).tripped()
    blocked = await first.step(Step(request()))
    finding = blocked.one("budget")
    assert finding.scope == Scope.KEY
    assert "daily budget" in finding.reason


async def test_key_daily_budget_is_off_unless_set() -> None:
    sim = RunSimulator([Budget()])
    results = await sim.run([Step(request(), costing(1.0)) for _ in range(5)])
    assert first_trip(results) is None


def test_both_caps_may_only_be_tightened_lower() -> None:
    for name in ("run_usd", "key_daily_usd"):
        assert BudgetConfig.model_fields[name].json_schema_extra == {"tighten": "lower"}
