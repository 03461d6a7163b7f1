"""`over_spawn`: requests of one run in flight at once."""

from __future__ import annotations

from runguard.detectors.over_spawn import OverSpawn
from tests.detectors.harness import RunSimulator, Step, request, shows


async def test_the_twenty_first_concurrent_request_is_stopped() -> None:
    sim = RunSimulator([OverSpawn()])
    pending = [await sim.admit(Step(request())) for _ in range(20)]
    assert not any(p.outcome.tripped() for p in pending)
    extra = await sim.admit(Step(request()))
    assert not extra.upstream  # answered by the proxy, its slot given back at once
    assert "21 requests" in extra.outcome.one("over_spawn").reason
    assert shows(extra.outcome.one("over_spawn"), "value", "limit")["value"] == 21


async def test_finished_requests_free_their_slot() -> None:
    sim = RunSimulator([OverSpawn()])
    pending = [await sim.admit(Step(request())) for _ in range(20)]
    await sim.complete(pending[0])
    again = await sim.admit(Step(request()))
    assert not again.outcome.tripped()


async def test_a_long_sequential_run_never_counts() -> None:
    sim = RunSimulator([OverSpawn()])
    results = await sim.run([Step(request()) for _ in range(50)])
    assert not any(r.tripped() for r in results)
