"""`context_window`: warn at 70% of the model's window, stop at 85%."""

from __future__ import annotations

from runguard.detectors.context_window import ContextWindow
from tests.detectors.harness import RunSimulator, Step, request, response, shows


async def test_below_seventy_percent_passes() -> None:
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(estimated_input_tokens=699), context_window=1000))
    assert not result.tripped()


async def test_seventy_percent_warns_even_when_the_action_is_block() -> None:
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(estimated_input_tokens=700), context_window=1000))
    finding = result.one("context_window")
    shows(finding, "value", "limit")
    assert finding.verdict.advisory
    assert not finding.blocking
    assert "70%" in finding.verdict.reason


async def test_eighty_five_percent_stops() -> None:
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(estimated_input_tokens=849), context_window=1000))
    assert not result.one("context_window").blocking
    result = await sim.step(Step(request(estimated_input_tokens=850), context_window=1000))
    finding = result.one("context_window")
    assert finding.blocking
    assert not finding.verdict.advisory


async def test_the_previous_responses_exact_count_beats_a_low_estimate() -> None:
    sim = RunSimulator([ContextWindow()])
    first = await sim.step(Step(request(estimated_input_tokens=100), response(input_tokens=900), context_window=1000))
    assert not first.tripped()
    second = await sim.step(Step(request(estimated_input_tokens=100), context_window=1000))
    assert second.one("context_window").blocking


async def test_unknown_window_is_skipped() -> None:
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(estimated_input_tokens=10**9), context_window=0))
    assert not result.tripped()
