"""`context_window`: warn at 70% of the model's window, stop at 85%."""

from __future__ import annotations

from runguard.detectors.context_window import ContextWindow
from tests.detectors.harness import SMALL_WINDOW_MODEL, RunSimulator, Step, request, response, shows


async def test_below_seventy_percent_passes() -> None:
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=699)))
    assert not result.tripped()


async def test_seventy_percent_warns_even_when_the_action_is_block() -> None:
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=700)))
    finding = result.one("context_window")
    shows(finding, "value", "limit")
    assert finding.action == "warn"  # advisory: recorded as a warning, no breaker opens
    assert "70%" in finding.reason


async def test_eighty_five_percent_stops() -> None:
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=849)))
    assert result.one("context_window").action == "warn"
    result = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=850)))
    finding = result.one("context_window")
    assert finding.action == "block"
    assert result.answer is not None  # stopped before it went upstream


async def test_the_previous_responses_exact_count_beats_a_low_estimate() -> None:
    sim = RunSimulator([ContextWindow()])
    answered = response(input_tokens=900)
    first = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=100), answered))
    assert not first.tripped()
    second = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=100)))
    assert second.one("context_window").action == "block"


async def test_a_model_the_tables_do_not_know_is_judged_against_the_default_window() -> None:
    """The guard always knows a window: the shipped table's default (128k) for a model no table names."""
    sim = RunSimulator([ContextWindow()])
    assert not (await sim.step(Step(request(model="in-house-model", estimated_input_tokens=89_599)))).tripped()
    result = await sim.step(Step(request(model="in-house-model", estimated_input_tokens=108_800)))
    assert result.one("context_window").action == "block"
    assert "of the 128,000-token context window" in result.one("context_window").reason
