"""`timeout`: wall clock since the run's first request."""

from __future__ import annotations

from runguard.detectors.timeout import Timeout, TimeoutConfig
from tests.detectors.harness import RunSimulator, Step, first_trip, request, shows


async def test_a_request_past_the_limit_is_stopped() -> None:
    sim = RunSimulator([(Timeout(), TimeoutConfig(seconds=10))])
    results = await sim.run([Step(request(), advance=4) for _ in range(5)])
    # Elapsed at the requests: 0, 4, 8, 12 s.
    assert first_trip(results) == 4
    assert "12 s" in results[3].one("timeout").reason
    shows(results[3].one("timeout"), "value", "limit")


async def test_exactly_at_the_limit_passes() -> None:
    sim = RunSimulator([(Timeout(), TimeoutConfig(seconds=10))])
    results = await sim.run([Step(request(), advance=5) for _ in range(3)])
    assert first_trip(results) is None


async def test_default_lets_a_55_minute_coding_session_finish() -> None:
    """Recorded coding sessions took 35 and 55 minutes at their agents' pace: the 30-minute default stopped them."""
    sim = RunSimulator([Timeout()])
    results = await sim.run([Step(request(), advance=30) for _ in range(111)])  # 55 minutes, a call each 30 s
    assert first_trip(results) is None
    late = await sim.run([Step(request(), advance=3000)])  # 105 minutes in
    assert first_trip(late) == 1
