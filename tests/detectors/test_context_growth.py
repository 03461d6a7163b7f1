"""`context_growth`: input tokens growing 3x over the first requests and growing runaway."""

from __future__ import annotations

from runguard.detectors.context_growth import ContextGrowth
from tests.detectors.harness import RunSimulator, Step, first_trip, request, response, shows


def with_inputs(tokens: list[int]) -> list[Step]:
    return [Step(request(), response(input_tokens=n)) for n in tokens]


async def test_a_twelve_step_plan_with_linearly_growing_context_passes() -> None:
    # Each step adds the same 1,500 tokens: the recent mean ends far above 3x the first, yet it is healthy.
    inputs = [2000 + 1500 * i for i in range(12)]
    assert sum(inputs[-5:]) / sum(inputs[:5]) >= 3
    assert first_trip(await RunSimulator([ContextGrowth()]).run(with_inputs(inputs))) is None


async def test_each_request_adding_more_than_the_one_before_trips() -> None:
    # Step i adds 1,000 * i tokens: quadratic growth.
    inputs = [2000 + 1000 * i * (i + 1) // 2 for i in range(12)]
    results = await RunSimulator([ContextGrowth()]).run(with_inputs(inputs))
    # At step 8 the recent mean is exactly 3.0x the first and the last steps add 2x what the first did.
    assert first_trip(results) == 8
    finding = results[7].one("context_growth")
    series = shows(finding, "series", "value", "limit")["series"]
    assert [p["x"] for p in series] == list(range(1, 9))
    assert finding.action == "block"
    assert "3.0x the first 5" in finding.reason
    assert finding.evidence["recent"] == inputs[3:8]


async def test_bulky_output_re_sent_every_turn_trips() -> None:
    inputs = [10_000 + 25_000 * i for i in range(12)]
    results = await RunSimulator([ContextGrowth()]).run(with_inputs(inputs))
    # Linear, but each step adds 25k tokens: trips once the 3x ratio holds (step 10), not before.
    assert first_trip(results) == 10
    assert "bulky" in results[9].one("context_growth").reason


async def test_small_planning_steps_then_steady_work_passes() -> None:
    inputs = [3000 + 100 * i for i in range(5)] + [3500 + 9000 * i for i in range(1, 11)]
    assert first_trip(await RunSimulator([ContextGrowth()]).run(with_inputs(inputs))) is None


async def test_responses_without_usage_are_skipped() -> None:
    steps = [Step(request(), None, status=None) for _ in range(12)]
    assert first_trip(await RunSimulator([ContextGrowth()]).run(steps)) is None


async def test_a_file_read_in_chunks_then_printed_whole_once_passes() -> None:
    """Each chunk read adds a few thousand tokens, growing with the chunks' lines; then the agent prints the
    whole file it patched, once: one big step, not a trend."""
    inputs = [1700, 2450, 5150, 8600, 14250, 20400, 52600, 55000, 57500, 60000]
    assert first_trip(await RunSimulator([ContextGrowth()]).run(with_inputs(inputs))) is None
