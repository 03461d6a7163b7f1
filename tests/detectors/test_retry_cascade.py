"""`retry_cascade`: consecutive upstream failures per API key and model."""

from __future__ import annotations

from runguard.detectors.retry_cascade import RetryCascade
from runguard.proxy.core.ops import Scope
from tests.detectors.harness import RunSimulator, Step, first_trip, request, response, shows


def failing(status: int | None = 503, model: str = "m") -> Step:
    if status is None:
        return Step(request(model=model), None, status=None)
    return Step(request(model=model), response(error="upstream error", usage=False), status=status)


def ok(model: str = "m") -> Step:
    return Step(request(model=model), response(text="fine"))


async def test_the_second_consecutive_failure_trips_the_key_and_model() -> None:
    sim = RunSimulator([RetryCascade()])
    results = await sim.run([failing(), failing(429), ok()])
    assert first_trip(results) == 2
    finding = results[1].one("retry_cascade")
    shows(finding, "value", "limit")
    assert finding.scope == Scope.KEY_MODEL
    assert finding.action == "block"
    assert "2 consecutive upstream failures" in finding.reason
    assert results[1].response  # decided after the response: opens the breaker for the next request
    assert results[2].blocked_by == "retry_cascade"


async def test_a_success_in_between_resets_the_count() -> None:
    sim = RunSimulator([RetryCascade()])
    assert first_trip(await sim.run([failing(), ok(), failing(), ok(), failing()])) is None


async def test_no_response_and_an_error_inside_a_200_stream_count_as_failures() -> None:
    sim = RunSimulator([RetryCascade()])
    in_stream = Step(request(model="m"), response(error="overloaded mid-stream"), status=200)
    results = await sim.run([failing(None), in_stream])
    assert first_trip(results) == 2


async def test_failures_of_different_models_are_counted_apart() -> None:
    sim = RunSimulator([RetryCascade()])
    assert first_trip(await sim.run([failing(model="a"), failing(model="b")])) is None
