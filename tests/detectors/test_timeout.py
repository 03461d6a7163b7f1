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


async def test_default_lets_the_longest_recorded_sessions_finish() -> None:
    """Recorded coding sessions took 35 and 55 minutes, and a CLI watching a build 4 h 33 min: the 30-minute
    default stopped them."""
    sim = RunSimulator([Timeout()])
    results = await sim.run([Step(request(), advance=290) for _ in range(57)])  # 4 h 35 min, 57 calls
    assert first_trip(results) is None
    late = await sim.run([Step(request(), advance=290) for _ in range(20)])  # the 19th: 6 h 1 min after the 1st
    assert first_trip(late) == 19
