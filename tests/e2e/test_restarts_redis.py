"""Stops and spend survive Redis losing what it held: restarted empty, restarted from its file, failed over.

Each test runs `runguard-proxy serve` with Redis state of the test's own (a `redis-server` started
here on a free port, or a primary, a replica and three Sentinels) and a SQLite record store, drives
it as `test_restarts` does, then takes the state away under the running proxy. The proxy must see
it (`state.generation_seconds`), rebuild the state from the records, and then refuse what it refused,
let the reset run through and carry the healthy run's counters on, counted once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_restarts import (
    BUDGET_KEY,
    CAP_THREE,
    HEALTHY_KEY,
    restart_config,
    script,
    still_stopped,
    stop_and_spend,
)
from tests.e2e.test_restarts import (
    _ask as ask,
)
from tests.proxy.store.conftest import drop_schema, with_schema
from tests.proxy.store.tcp_relay import TcpRelay
from tests.services import require_postgres, unique_name
from tests.support.processes import ServeProcess, start_serve
from tests.support.redis_group import SERVICE, persistent_redis, sentinel_group
from tests.support.redis_server import own_redis
from tests.support.served import write_config
from tests.support.upstream import FakeUpstream, closed_port

pytestmark = [pytest.mark.redis, pytest.mark.slow]

REBUILT = "state rebuilt from the records"
Serve = Callable[..., Any]


@pytest.fixture
async def serve(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[Serve]:
    """serve(**state) -> a new `serve` process with that state section and the test's SQLite store."""
    upstream.script = script
    started: list[ServeProcess] = []

    async def make(
        database_url: str = f"sqlite+aiosqlite:///{tmp_path}/runguard.db", workers: int = 1, **state: Any
    ) -> ServeProcess:
        settings = restart_config(upstream.url, database_url, **state)
        settings["state"] |= {"generation_seconds": 0.2, "timeout": 0.5}
        config = str(write_config(tmp_path, settings))
        served = await start_serve({}, tmp_path, "--config", config, "--workers", str(workers))
        started.append(served)
        return served

    yield make
    for served in started:
        await served.stop()


async def said(served: ServeProcess, text: str, times: int, within: float = 15.0) -> None:
    """Until the process has said `text` `times` times."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    for _ in range(int(within / 0.02)):
        if served.text().count(text) >= times or loop.time() > deadline:
            break
        await asyncio.sleep(0.02)
    assert served.text().count(text) >= times, served.diagnostics()


async def rebuilt(served: ServeProcess, times: int, within: float = 15.0) -> None:
    """Until the process has said `times` times that it rebuilt its state."""
    await said(served, REBUILT, times, within)


async def test_redis_restarted_empty_is_rebuilt_from_the_records(serve: Serve, upstream: FakeUpstream) -> None:
    async with own_redis() as redis:
        served = await serve(url=redis.url)
        await rebuilt(served, 1)  # a new Redis: nothing in it yet, rebuilt before serving
        await stop_and_spend(served.url)
        await redis.stop()
        await redis.start()  # the same port, nothing kept
        await rebuilt(served, 2)
        await still_stopped(served.url, upstream, served.diagnostics())


async def test_redis_restarted_from_its_file_counts_nothing_twice(
    serve: Serve, upstream: FakeUpstream, tmp_path: Path
) -> None:
    async with persistent_redis(tmp_path / "redis") as redis:
        served = await serve(url=redis.url)
        await stop_and_spend(served.url)
        await redis.stop()
        await redis.start()  # everything kept: another server (its run id) all the same, merged with the records
        await rebuilt(served, 2)
        await still_stopped(served.url, upstream, served.diagnostics())


async def test_a_replica_joining_late_sees_the_same_stops_and_spend(serve: Serve, upstream: FakeUpstream) -> None:
    async with own_redis() as redis:
        first = await serve(url=redis.url)
        await stop_and_spend(first.url)
        late = await serve(url=redis.url)
        assert REBUILT not in late.text()  # the state is whole: nothing to rebuild, nothing counted again
        await still_stopped(late.url, upstream, late.diagnostics())


async def test_workers_started_on_a_lost_state_rebuild_it_once_and_all_refuse(
    serve: Serve, upstream: FakeUpstream
) -> None:
    async with own_redis() as redis:
        first = await serve(url=redis.url)
        await stop_and_spend(first.url)
        assert await first.stop() == 0
        await redis.stop()
        await redis.start()  # everything the state held is gone
        workers = await serve(url=redis.url, workers=2)
        await rebuilt(workers, 1)
        await still_stopped(workers.url, upstream, workers.diagnostics())
        assert workers.text().count(REBUILT) == 1  # one worker rebuilt it; the other waited for it


async def test_a_sentinel_failover_mid_run_keeps_every_stop(
    serve: Serve, upstream: FakeUpstream, tmp_path: Path
) -> None:
    async with sentinel_group(tmp_path / "sentinel") as group:
        served = await serve(sentinels=group.addresses, sentinel_service=SERVICE)
        group.cut_replica()  # what follows never reaches the replica: the failover loses it all
        await stop_and_spend(served.url)
        await group.fail_over()  # the primary killed: the Sentinels promote the replica
        await rebuilt(served, 2)
        await still_stopped(served.url, upstream, served.diagnostics())


@pytest.mark.postgres
async def test_requests_served_while_the_store_was_down_count_once_their_records_land(
    serve: Serve, upstream: FakeUpstream
) -> None:
    base, schema = require_postgres(), unique_name("rg_backlog")
    relay = TcpRelay(closed_port(), "127.0.0.1", 5432)
    await relay.up()
    through_relay = with_schema(re.sub(r"@[^/]+/", f"@127.0.0.1:{relay.port}/", base, count=1), schema)
    try:
        async with own_redis() as redis:
            served = await serve(through_relay, url=redis.url)
            assert await ask(served.url, HEALTHY_KEY, "healthy-run", **CAP_THREE) == "ok"
            await relay.down()  # the store goes away: what follows waits in the writer's backlog
            assert await ask(served.url, HEALTHY_KEY, "healthy-run", **CAP_THREE) == "ok"
            assert await ask(served.url, BUDGET_KEY, "spender-1") == "ok"  # $1.20 of the key's $1.00
            await redis.stop()
            await redis.start()  # and Redis forgets it all
            await said(served, "Redis lost what it held", 1)
            await relay.up()  # the store is back: the backlog lands, then the rebuild reads it
            await rebuilt(served, 2, within=30.0)
            assert await ask(served.url, BUDGET_KEY, "spender-2") == "runguard_budget", served.diagnostics()
            assert await ask(served.url, HEALTHY_KEY, "healthy-run", **CAP_THREE) == "ok"  # its third: once each
            assert await ask(served.url, HEALTHY_KEY, "healthy-run", **CAP_THREE) == "runguard_max_requests"
            assert await served.stop() == 0  # with the store there: its last records land
    finally:
        await relay.down()
        await drop_schema(base, schema)
