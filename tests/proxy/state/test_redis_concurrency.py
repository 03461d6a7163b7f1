"""Two replicas (two independent `RedisState` clients) hammering the same scopes at once lose no update.

Each client has its own connection pool, so the calls really interleave on the
server; only the batch script's atomicity keeps the results exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from runguard.proxy.core.ops import Add, CompareAndSet, Get, Push, Put, Scope
from runguard.proxy.state.base import ScopeTtls
from runguard.proxy.state.redis import RedisState
from tests.proxy.state.support import IDS, delete_prefix, redis_state
from tests.services import require_redis, unique_name

pytestmark = pytest.mark.redis


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[RedisState, RedisState]]:
    url = require_redis()
    prefix = unique_name("rgtest_state")
    # 16 connections each: enough for the calls to interleave on the server; a generous timeout, since
    # the point here is atomicity, not speed (a loaded CI machine once took over 1 s to connect 200 sockets).
    first, second = (redis_state(url, prefix, timeout=5.0, max_connections=16) for _ in range(2))
    yield first, second
    await first.close()
    await second.close()
    await delete_prefix(url, prefix)


async def test_concurrent_adds_from_two_replicas_sum_exactly(replicas: tuple[RedisState, RedisState]) -> None:
    calls = [replica.execute(IDS, [Add(Scope.RUN, "requests")]) for replica in replicas for _ in range(100)]
    results = await asyncio.gather(*calls)
    # every Add saw a distinct value: none was lost or applied twice
    seen = [result[0] for result in results]
    assert all(isinstance(value, float) for value in seen)
    assert sorted(value for value in seen if isinstance(value, float)) == [float(n) for n in range(1, 201)]
    assert await replicas[0].execute(IDS, [Get(Scope.RUN, "requests")]) == [200.0]


async def test_fractional_adds_from_two_replicas(replicas: tuple[RedisState, RedisState]) -> None:
    """Costs: 200 adds of 0.25 (exact in binary) from both replicas, with a second field in the same batch."""
    ops = [Add(Scope.KEY_DAY, "usd", 0.25), Add(Scope.RUN, "usd", 0.25)]
    await asyncio.gather(*(replica.execute(IDS, ops) for replica in replicas for _ in range(100)))
    assert await replicas[1].execute(IDS, [Get(Scope.KEY_DAY, "usd"), Get(Scope.RUN, "usd")]) == [50.0, 50.0]


async def test_one_half_open_probe_among_twenty_callers(replicas: tuple[RedisState, RedisState]) -> None:
    await replicas[0].execute(IDS, [Put(Scope.KEY_MODEL, "breaker", "open")])

    async def claim(caller: int) -> str:
        replica = replicas[caller % 2]
        (stored,) = await replica.execute(IDS, [CompareAndSet(Scope.KEY_MODEL, "breaker", "open", f"probe:{caller}")])
        assert isinstance(stored, str)
        return stored

    stored = await asyncio.gather(*(claim(caller) for caller in range(20)))
    winners = [caller for caller, value in enumerate(stored) if value == f"probe:{caller}"]
    assert len(winners) == 1
    assert set(stored) == {f"probe:{winners[0]}"}  # every loser sees the winner's claim


async def test_unique_pushes_from_two_replicas_hold_no_duplicates(replicas: tuple[RedisState, RedisState]) -> None:
    items = [f"sig-{n}" for n in range(40)]

    async def push(replica: RedisState, item: str) -> None:
        await replica.execute(IDS, [Push(Scope.RUN, "seen", (item,), keep=100, unique=True), Add(Scope.RUN, "n")])

    # both replicas push every item, in opposite orders, all at once
    await asyncio.gather(
        *(push(replicas[0], item) for item in items), *(push(replicas[1], item) for item in reversed(items))
    )
    (window,) = await replicas[0].execute(IDS, [Get(Scope.RUN, "seen")])
    assert isinstance(window, tuple)
    assert len(window) == len(set(window)) == len(items)
    assert set(window) == set(items)
    assert await replicas[1].execute(IDS, [Get(Scope.RUN, "n")]) == [80.0]


async def test_a_burst_shares_the_capped_pool_instead_of_opening_a_connection_each() -> None:
    url = require_redis()
    prefix, name = unique_name("rgtest_state"), unique_name("rgtest_pool")
    state = RedisState.from_url(
        f"{url}?client_name={name}", key_prefix=prefix, ttls=ScopeTtls(), timeout=5.0, max_connections=3
    )
    watcher = aioredis.from_url(url)
    try:
        results = await asyncio.gather(*(state.execute(IDS, [Add(Scope.RUN, "n")]) for _ in range(200)))
        assert sorted(r[0] for r in results if isinstance(r[0], float)) == [float(n) for n in range(1, 201)]
        mine = [c for c in await watcher.client_list() if c.get("name") == name]
        assert 1 <= len(mine) <= 3  # 200 concurrent batches went through at most 3 connections
    finally:
        await state.close()
        await watcher.aclose()
        await delete_prefix(url, prefix)
