"""`context_window`: warn at 70% of the model's window, stop at 95%."""

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


async def test_ninety_five_percent_stops() -> None:
    """A coding agent working at 86% of its window (a real Claude Code session) is warned, not stopped."""
    sim = RunSimulator([ContextWindow()])
    result = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=949)))
    assert result.one("context_window").action == "warn"
    result = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=950)))
    finding = result.one("context_window")
    assert finding.action == "block"
    assert result.answer is not None  # stopped before it went upstream


async def test_the_previous_responses_exact_count_beats_a_low_estimate() -> None:
    sim = RunSimulator([ContextWindow()])
    answered = response(input_tokens=960)
    first = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=100), answered))
    assert not first.tripped()
    second = await sim.step(Step(request(model=SMALL_WINDOW_MODEL, estimated_input_tokens=100)))
    assert second.one("context_window").action == "block"


async def test_a_model_the_tables_do_not_know_has_no_window_limit() -> None:
    """A window is never guessed: a guess from another model (gpt-4's 8,192 for gpt-4-1106-preview) stopped a
    healthy agent's first request."""
    sim = RunSimulator([ContextWindow()])
    assert not (await sim.step(Step(request(model="in-house-model", estimated_input_tokens=900_000)))).tripped()


async def test_a_dated_model_is_judged_against_its_own_window_not_a_prefix_s() -> None:
    sim = RunSimulator([ContextWindow()])
    assert not (await sim.step(Step(request(model="gpt-4-1106-preview", estimated_input_tokens=60_000)))).tripped()
    result = await sim.step(Step(request(model="gpt-4-0613", estimated_input_tokens=7_900)))
    assert result.one("context_window").action == "block"
    assert "of the 8,192-token context window" in result.one("context_window").reason
