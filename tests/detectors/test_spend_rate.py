"""`spend_rate`: USD per minute over a sliding window, per run and per key."""

from __future__ import annotations

from runguard.detectors.spend_rate import KEEP, SpendRate, SpendRateConfig, per_minute
from runguard.proxy.core.ops import Scope
from tests.detectors.harness import RunSimulator, Step, costing, first_trip, request, shows


def steps(count: int, usd: float, every: float) -> list[Step]:
    return [Step(request(), costing(usd), advance=every) for _ in range(count)]


async def test_a_run_spending_fast_is_stopped_once_its_minute_passes_the_limit() -> None:
    # $0.30 every 5 s: $3.60 a minute; the 9th response brings the last minute to $2.70 (over $2.50).
    results = await RunSimulator([SpendRate()]).run(steps(12, 0.30, 5.0))
    assert first_trip(results) == 9
    finding = results[8].one("spend_rate")
    assert results[8].response == [finding]  # judged after the response: the run's next request is stopped
    assert results[9].blocked_by == "spend_rate"
    assert finding.action == "block" and finding.scope == Scope.RUN
    assert shows(finding, "value", "limit")["usd_in_window"] == 2.7 and finding.evidence["responses"] == 9
    assert "run is spending $2.70 a minute" in finding.reason


async def test_the_same_spend_at_a_healthy_pace_passes() -> None:
    # $0.30 every 10 s: $1.80 a minute, for ten minutes ($18 in all: the budget's business, not the pace's).
    assert first_trip(await RunSimulator([SpendRate()]).run(steps(60, 0.30, 10.0))) is None


async def test_spend_older_than_the_window_falls_out() -> None:
    burst = steps(8, 0.30, 1.0)  # $2.40 in 8 s: under the limit
    later = steps(8, 0.30, 1.0)
    later[0] = Step(request(), costing(0.30), advance=61.0)
    assert first_trip(await RunSimulator([SpendRate()]).run([*burst, *later])) is None


async def test_more_responses_than_kept_are_judged_by_their_own_pace() -> None:
    # 200 cheap responses a second apart: $0.02 each, $1.20 a minute: under; at $0.05 ($3 a minute): over.
    assert first_trip(await RunSimulator([SpendRate()]).run(steps(200, 0.02, 1.0))) is None
    results = await RunSimulator([SpendRate()]).run(steps(200, 0.05, 1.0))
    assert first_trip(results) == 50


async def test_the_key_limit_counts_every_run_of_the_key() -> None:
    first = RunSimulator([(SpendRate(), SpendRateConfig(key_usd_per_minute=1.0))], run_id="a")
    second = first.another_run("b")  # the same key through the same guard (one clock)
    for sim in (first, second, first, second):  # $0.80 of the key's in 8 s, $0.40 of each run's
        assert not (await sim.step(Step(request(), costing(0.2), advance=2.0))).tripped()
    outcome = await second.step(Step(request(), costing(0.2), advance=2.0))
    finding = outcome.one("spend_rate")
    assert finding.scope == Scope.KEY and "API key is spending $1.00 a minute" in finding.reason


async def test_free_responses_keep_nothing() -> None:
    sim = RunSimulator([SpendRate()])
    await sim.run(steps(5, 0.0, 1.0))
    assert await sim.run_state_bytes() < 200  # the guard's own counters only


def test_per_minute_skips_unreadable_items_and_scales_a_full_window() -> None:
    assert per_minute(("x", "10:abc", "100:500000"), 110.0, 60) == (0.5, 0.5, 1)
    full = tuple(f"{100 + i // 8}:100000" for i in range(KEEP))  # 64 responses in 8 s, $0.10 each
    rate, spent, count = per_minute(full, 108.0, 60)
    assert count == KEEP and round(spent, 2) == 6.4 and round(rate, 1) == 48.0
