"""`max_requests`: the step cap."""

from __future__ import annotations

from runguard.detectors.max_requests import MaxRequests, MaxRequestsConfig
from tests.detectors.harness import RunSimulator, Step, first_trip, request, shows


async def test_the_request_after_the_limit_is_stopped() -> None:
    sim = RunSimulator([(MaxRequests(), MaxRequestsConfig(limit=3))])
    results = await sim.run([Step(request()) for _ in range(5)])
    assert first_trip(results) == 4
    assert "request 4 exceeds" in results[3].one("max_requests").reason
    assert shows(results[3].one("max_requests"), "value", "limit")["value"] == 4


async def test_default_allows_the_longest_recorded_coding_sessions() -> None:
    """A fifth of recorded coding sessions make 100 calls or more; the longest recorded run (a developer's two
    hours with Claude Code) made 371: all pass; the 501st stops."""
    sim = RunSimulator([MaxRequests()])
    results = await sim.run([Step(request()) for _ in range(501)])
    assert first_trip(results) == 501
