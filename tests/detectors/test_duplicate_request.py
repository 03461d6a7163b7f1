"""`duplicate_request`: the same body sent again and again in a row."""

from __future__ import annotations

from runguard.detectors.duplicate_request import DuplicateRequest
from tests.detectors.harness import RunSimulator, Step, first_trip, request, shows


async def test_the_fourth_identical_body_in_a_row_is_stopped() -> None:
    sim = RunSimulator([DuplicateRequest()])
    results = await sim.run([Step(request(), body="same") for _ in range(5)])
    # An SDK's two default retries give three identical sends: still normal.
    assert first_trip(results) == 4
    assert "4 times in a row" in results[3].one("duplicate_request").reason
    shows(results[3].one("duplicate_request"), "value", "limit")


async def test_a_different_body_in_between_restarts_the_count() -> None:
    sim = RunSimulator([DuplicateRequest()])
    bodies = ["a", "a", "a", "b", "a", "a", "a"]
    results = await sim.run([Step(request(), body=b) for b in bodies])
    assert first_trip(results) is None


async def test_distinct_bodies_never_count() -> None:
    sim = RunSimulator([DuplicateRequest()])
    assert first_trip(await sim.run([Step(request()) for _ in range(20)])) is None


async def test_identical_requests_in_flight_together_are_samples_not_retries() -> None:
    """Five samples of one prompt sent at once (to vote, or to pick the best): each but the first is sent while
    another is out, so none is a retry. Sent again once all are answered, the body is a fifth send in a row."""
    sim = RunSimulator([DuplicateRequest()])
    samples = [await sim.admit(Step(request(), body="same")) for _ in range(5)]
    assert [p.outcome.request for p in samples] == [[]] * 5
    for sample in samples:
        await sim.complete(sample)
    again = await sim.step(Step(request(), body="same"))
    assert [f.detector for f in again.request] == ["duplicate_request"]
