"""Several replicas writing to one PostgreSQL: no conflicts, no duplicate rows, exact run totals."""

from __future__ import annotations

import asyncio

import pytest

from runguard.proxy.store import QueueSink, StoreReader
from tests.proxy.store import factory
from tests.proxy.store.conftest import count

pytestmark = pytest.mark.postgres


async def test_two_writers_share_runs_without_duplicates(pg_url: str) -> None:
    """Both replicas serve requests of the same runs, and (in-memory state) number them the same."""
    sinks = [QueueSink(pg_url, batch_size=25, flush_interval=0.01) for _ in range(2)]
    for sink in sinks:
        sink.start()
    runs = [f"shared-{n}" for n in range(10)]
    try:
        for step in range(1, 41):
            for n, run_id in enumerate(runs):
                for replica, sink in enumerate(sinks):
                    agent = f"agent-{(step + replica) % 3}"
                    sink.submit(factory.request(run_id, index=step, at=factory.T0 + step + n / 100, agent=agent))
            if step % 10 == 0:
                await asyncio.sleep(0)  # let both writers interleave their transactions
        sinks[0].submit(factory.trip(runs[0], at=factory.T0 + 100))
        await asyncio.gather(*(sink.flush() for sink in sinks))
        assert [sink.failures for sink in sinks] == [0, 0]
    finally:
        for sink in sinks:
            await sink.close()
    assert await count(pg_url, "requests") == 2 * 40 * 10
    assert await count(pg_url, "runs") == 10
    assert await count(pg_url, "run_agents") == 10 * 3
    reader = StoreReader.open(pg_url)
    try:
        for run in await reader.runs.recent(100):
            assert run["requests"] == 80 and run["input_tokens"] == 8000
            assert sorted(run["agents"]) == ["agent-0", "agent-1", "agent-2"]
            assert run["first_seen"] == pytest.approx(factory.T0 + 1, abs=0.1)
        detail = await factory.run_detail(reader.runs, runs[0])
        assert detail is not None and detail["run"]["status"] == "tripped:non_progress"
        assert len(detail["requests"]) == 80
    finally:
        await reader.close()
