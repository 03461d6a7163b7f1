"""RedisState's own behaviour (what every backend does is in test_base, replicas at once in
test_redis_concurrency): its keys are hash-tagged and all expire, and when Redis is down, restarted, silent
or never there, or a reply is lost, calls fail fast with StateUnavailable, never count twice, then recover
by themselves.

The fault tests run a redis-server of their own (killed and restarted at will), never the shared one;
the key tests use the shared server under a key prefix of their own, deleted afterwards. Either is
skipped with the reason when there is no Redis (tests.services).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.ops import Add, CompareAndSet, Get, Op, Push, Put, Scope
from runguard.proxy.state.redis import RedisState
from tests.proxy.state.support import IDS, delete_prefix, prefix_keys, redis_state
from tests.services import require_redis, unique_name
from tests.support.redis_relay import LosingRelay
from tests.support.redis_server import free_port, own_redis

pytestmark = pytest.mark.redis

TIMEOUT = 0.5
BATCH = (Add(Scope.RUN, "n"), Push(Scope.RUN, "w", ("a",), keep=3), Get(Scope.KEY_MODEL, "breaker"))


def calls(state: RedisState) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every backend call, ready to run."""
    return {
        "execute": lambda: state.execute(IDS, BATCH),
        "execute one scope": lambda: state.execute(IDS, [Add(Scope.RUN, "n")]),
        "read_scope": lambda: state.read_scope(Scope.RUN, IDS.run),
        "clear_scope": lambda: state.clear_scope(Scope.RUN, IDS.run),
        "remember": lambda: state.remember("resp:1", "run-1", 60.0),
        "recall": lambda: state.recall("resp:1"),
    }


async def assert_unavailable_fast(state: RedisState) -> None:
    for name, call in calls(state).items():
        started = time.monotonic()
        with pytest.raises(StateUnavailable):
            await call()
        assert time.monotonic() - started < 2 * TIMEOUT, name
    started = time.monotonic()
    assert await state.ping() is False
    assert time.monotonic() - started < 2 * TIMEOUT


async def script_cached(url: str, sha: str) -> bool:
    client = aioredis.from_url(url)
    try:
        return bool((await client.script_exists(sha))[0])
    finally:
        await client.aclose()


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """A URL whose server accepts connections and reads, but never answers."""
    held: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        while await reader.read(65536):
            pass

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"redis://127.0.0.1:{port}/0"
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


async def test_down_fails_fast_then_reconnects_and_reloads_the_script() -> None:
    async with own_redis() as server:
        state = redis_state(server.url, "rgfault", timeout=TIMEOUT)
        try:
            assert await state.execute(IDS, BATCH) == [1.0, ("a",), None]
            await server.stop()
            await assert_unavailable_fast(state)
            await assert_unavailable_fast(state)  # and again: nothing got stuck
            await server.start()  # same port, empty, script cache empty
            assert not await script_cached(server.url, state.script_sha)
            # the same RedisState: its pool reconnects, NOSCRIPT reloads the script
            assert await state.execute(IDS, BATCH) == [1.0, ("a",), None]
            assert await script_cached(server.url, state.script_sha)
            assert await state.ping() is True
            await state.remember("resp:1", "run-1", 60.0)
            assert await state.recall("resp:1") == "run-1"
        finally:
            await state.close()


async def test_a_flushed_script_cache_is_refilled() -> None:
    async with own_redis() as server:
        state = redis_state(server.url, "rgfault", timeout=TIMEOUT)
        other = aioredis.from_url(server.url)
        try:
            await state.execute(IDS, BATCH)
            await other.script_flush()
            batch: list[Op] = [*BATCH, Add(Scope.KEY, "n"), CompareAndSet(Scope.KEY_DAY, "c", None, "x")]
            assert await state.execute(IDS, batch) == [2.0, ("a", "a"), None, 1.0, "x"]
            await other.script_flush()  # flushed again: refilled again, not only once per process
            assert await state.execute(IDS, [Add(Scope.RUN, "n"), Get(Scope.RUN, "w")]) == [3.0, ("a", "a")]
            assert await script_cached(server.url, state.script_sha)
        finally:
            await other.aclose()
            await state.close()


async def test_calls_in_flight_when_redis_dies_fail_or_succeed_but_never_hang() -> None:
    async with own_redis() as server:
        state = redis_state(server.url, "rgfault", timeout=TIMEOUT)
        try:
            await state.execute(IDS, BATCH)

            stopped = asyncio.Event()

            async def hammer() -> int:
                """Calls until 20 of them started after the server stopped (on a fast machine a fixed
                number could all be done before it stops)."""
                failures = after_stop = 0
                while after_stop < 20:
                    after_stop += stopped.is_set()
                    try:
                        await state.execute(IDS, BATCH)
                    except StateUnavailable:
                        failures += 1
                return failures

            started = time.monotonic()
            workers = [asyncio.create_task(hammer()) for _ in range(10)]
            await asyncio.sleep(0.05)
            await server.stop()
            stopped.set()
            failures = await asyncio.wait_for(asyncio.gather(*workers), timeout=10)
            assert sum(failures) > 0
            assert time.monotonic() - started < 10
            await server.start()
            # A run of its own: batches whose replies were lost when the server died are sent again
            # in the background once it is back (each runs once), and they add to run-1.
            fresh = dataclasses.replace(IDS, run="run-after-restart")
            assert await state.execute(fresh, BATCH) == [1.0, ("a",), None]
        finally:
            await state.close()


FIRST = [Add(Scope.RUN, "n"), Push(Scope.RUN, "w", ("a",), keep=5)]
SECOND = [Add(Scope.RUN, "n"), Push(Scope.RUN, "w", ("b",), keep=5)]


@asynccontextmanager
async def relayed(hold: bool = False) -> AsyncIterator[tuple[LosingRelay, RedisState, RedisState]]:
    """A backend through a `LosingRelay` and one straight to the same server; the run has had `FIRST`."""
    async with own_redis() as server, LosingRelay(server.url, hold=hold) as relay:
        state = redis_state(relay.url, "rgfault", timeout=TIMEOUT)
        direct = redis_state(server.url, "rgfault", timeout=TIMEOUT)
        try:
            assert await state.execute(IDS, FIRST) == [1.0, ("a",)]
            yield relay, state, direct
        finally:
            await state.close()
            await direct.close()


async def assert_second_ran_once(state: RedisState, direct: RedisState) -> None:
    """`SECOND` has run exactly once, and the next batch goes through the relay as usual."""
    assert await direct.execute(IDS, [Get(Scope.RUN, "n"), Get(Scope.RUN, "w")]) == [2.0, ("a", "b")]
    assert await state.execute(IDS, [Add(Scope.RUN, "n")]) == [3.0]


async def spoil_run_key(url: str, state: RedisState) -> None:
    """Make the run's key hold something that is not a hash: the script's next call there answers WRONGTYPE."""
    raw = aioredis.from_url(url)
    try:
        await raw.set(state.key(Scope.RUN, IDS.run), "not a hash")
    finally:
        await raw.aclose()


async def test_a_batch_whose_reply_was_lost_is_not_applied_twice() -> None:
    """redis-py sends a call again when its connection broke: a batch that had run gives its reply again, once."""
    async with relayed() as (relay, state, direct):
        relay.armed = True
        # the batch ran, its reply was lost, the client sent it again: it answers as it first did
        assert await state.execute(IDS, [*SECOND, Get(Scope.KEY, "absent")]) == [2.0, ("a", "b"), None]
        assert relay.lost == 1
        await assert_second_ran_once(state, direct)


@pytest.mark.parametrize("lost", ["reply", "command"])
async def test_a_batch_whose_call_timed_out_runs_exactly_once_and_says_so(lost: str) -> None:
    """The reply (the batch ran) or the command (it did not) is lost and the call times out: the caller
    fails within its timeout, and the batch, sent again under its marker, has run once when `pending` answers."""
    async with relayed(hold=True) as (relay, state, direct):
        relay.armed, relay.armed_command = lost == "reply", lost == "command"
        started = time.monotonic()
        with pytest.raises(StateUnavailable) as failed:
            await state.execute(IDS, SECOND)
        assert time.monotonic() - started < 2 * TIMEOUT
        assert relay.lost == 1
        assert failed.value.pending is not None
        assert await failed.value.pending == [2.0, ("a", "b")]
        await assert_second_ran_once(state, direct)


async def test_an_error_the_server_answered_is_not_pending() -> None:
    """An error reply is an answer (here: the run's key holds something that is not a hash): nothing is sent again."""
    async with own_redis() as server:
        state = redis_state(server.url, "rgfault", timeout=TIMEOUT)
        try:
            await spoil_run_key(server.url, state)
            with pytest.raises(StateUnavailable, match="WRONGTYPE") as failed:
                await state.execute(IDS, [Add(Scope.RUN, "n")])
            assert failed.value.pending is None
        finally:
            await state.close()


async def test_a_resend_answered_with_an_error_stops_at_once() -> None:
    """A lost command's resend finds the run's key unusable (WRONGTYPE): an answer, so it is not sent again."""
    async with own_redis() as server, LosingRelay(server.url, hold=True) as relay:
        state = redis_state(relay.url, "rgfault", timeout=TIMEOUT)
        try:
            relay.armed_command = True
            with pytest.raises(StateUnavailable) as failed:
                await state.execute(IDS, [Add(Scope.RUN, "n")])
            await spoil_run_key(server.url, state)
            assert failed.value.pending is not None
            started = time.monotonic()
            assert await failed.value.pending is None
            assert time.monotonic() - started < 2 * TIMEOUT  # not sent again until the marker's half-life
        finally:
            await state.close()


async def test_closing_stops_the_batches_still_being_sent(silent_server: str) -> None:
    state = redis_state(silent_server, "rgfault", timeout=TIMEOUT)
    with pytest.raises(StateUnavailable) as failed:
        await state.execute(IDS, [Add(Scope.RUN, "n")])
    pending = failed.value.pending
    assert pending is not None
    started = time.monotonic()
    await state.close()
    assert time.monotonic() - started < TIMEOUT
    with pytest.raises(asyncio.CancelledError):
        await pending


async def test_an_outage_is_not_met_with_more_resends_than_connections(silent_server: str) -> None:
    state = redis_state(silent_server, "rgfault", timeout=TIMEOUT, max_connections=2)
    try:
        pending = []
        for _ in range(3):
            with pytest.raises(StateUnavailable) as failed:
                await state.execute(IDS, [Add(Scope.RUN, "n")])
            pending.append(failed.value.pending)
        assert [p is not None for p in pending] == [True, True, False]
    finally:
        await state.close()


async def test_an_unreachable_url_fails_fast() -> None:
    state = redis_state(f"redis://127.0.0.1:{free_port()}/0", "rgfault", timeout=TIMEOUT)
    try:
        await assert_unavailable_fast(state)
    finally:
        await state.close()


async def test_a_silent_server_fails_after_the_timeout(silent_server: str) -> None:
    state = redis_state(silent_server, "rgfault", timeout=TIMEOUT)
    try:
        started = time.monotonic()
        with pytest.raises(StateUnavailable):
            await state.execute(IDS, BATCH)
        assert TIMEOUT * 0.9 <= time.monotonic() - started < 2 * TIMEOUT
        started = time.monotonic()
        assert await state.ping() is False
        assert time.monotonic() - started < 2 * TIMEOUT
    finally:
        await state.close()


async def test_a_batch_marker_outlives_a_slow_call_and_its_retry() -> None:
    """With a long `state.timeout` a call and its retry take longer: the marker lives 4x the timeout."""
    url = require_redis()
    prefix = unique_name("rgtest_state")
    state = redis_state(url, prefix, timeout=5.0)
    client = aioredis.from_url(url)
    try:
        await state.execute(IDS, [Add(Scope.RUN, "n")])
        (marker,) = [key for key in await prefix_keys(url, prefix) if b":once:" in key]
        assert 5_000 < await client.pttl(marker) <= 20_000
    finally:
        await client.aclose()
        await state.close()
        await delete_prefix(url, prefix)


async def test_redis_keys_are_hash_tagged_and_all_expire() -> None:
    url = require_redis()
    prefix = unique_name("rgtest_state")
    state = redis_state(url, prefix)
    assert isinstance(state, RedisState)
    try:
        await state.execute(
            IDS,
            [
                Add(Scope.RUN, "n"),
                Put(Scope.KEY, "s", "v"),
                Push(Scope.KEY_MODEL, "w", ("a",), keep=2),
                Add(Scope.KEY_DAY, "usd", 1),
                Put(Scope.RUN_TRACE, "seen", "1"),
            ],
        )
        await state.remember("resp:1", "run-1", 60.0)
        keys = await prefix_keys(url, prefix)
        # the batch's marker (it ran once) carries the hash tag of the batch's first scope
        markers = [key for key in keys if b":once:" in key]
        assert len(markers) == 1
        assert markers[0].startswith(f"{prefix}:{{run:{IDS.run}}}:once:".encode())
        assert key_slot(markers[0]) == key_slot(f"run:{IDS.run}".encode())
        assert sorted(set(keys) - set(markers)) == sorted(
            [
                f"{prefix}:{{run:{IDS.run}}}".encode(),
                f"{prefix}:{{key:{IDS.key}}}".encode(),
                f"{prefix}:{{key_model:{IDS.key_model}}}".encode(),
                f"{prefix}:{{key_day:{IDS.key_day}}}".encode(),
                f"{prefix}:{{run_trace:{IDS.run}}}".encode(),
                f"{prefix}:kv:resp:1".encode(),
            ]
        )
        client = aioredis.from_url(url)
        try:
            ttls = {key: await client.pttl(key) for key in keys}
            assert all(ttl > 0 for ttl in ttls.values()), ttls
            assert ttls[markers[0]] <= 5_000  # gone soon: only a retry of the same call looks for it
            assert 0 < ttls[f"{prefix}:{{run:{IDS.run}}}".encode()] <= 3600_000
            assert 3600_000 < ttls[f"{prefix}:{{key_day:{IDS.key_day}}}".encode()] <= 2 * 86400_000
            assert 2 * 86400_000 < ttls[f"{prefix}:{{run_trace:{IDS.run}}}".encode()] <= 7 * 86400_000
            # a scope's every key maps to the slot of its hash tag (Redis Cluster keeps the scope on one node)
            for scope in Scope:
                key = state.key(scope, IDS.of(scope))
                tag = f"{scope.value}:{IDS.of(scope)}"
                assert key == f"{prefix}:{{{tag}}}"
                assert key_slot(key.encode()) == key_slot(tag.encode())
        finally:
            await client.aclose()
    finally:
        await state.close()
        await delete_prefix(url, prefix)


async def test_an_endpoint_whose_primary_became_a_replica_is_followed_to_the_new_primary(tmp_path: Path) -> None:
    """A managed endpoint: one name, a primary behind it that fails over. The old primary, now a replica,
    answers READONLY on the pooled connections; they are dropped, and the next call reaches the new one."""
    from tests.proxy.store.tcp_relay import TcpRelay
    from tests.support.redis_group import RedisProcess

    old, new = RedisProcess(tmp_path / "old", ['save ""']), RedisProcess(tmp_path / "new", ['save ""'])
    await old.start()
    await new.start()
    endpoint = TcpRelay(free_port(), "127.0.0.1", old.port)
    await endpoint.up()
    state = redis_state(f"redis://127.0.0.1:{endpoint.port}/0", "rgtest_endpoint")
    try:
        assert await state.execute(IDS, [Add(Scope.RUN, "n")]) == [1.0]
        demote = aioredis.from_url(old.url)
        await demote.replicaof("127.0.0.1", str(new.port))  # the failover: old follows new
        await demote.aclose()
        endpoint.retarget("127.0.0.1", new.port)
        with pytest.raises(StateUnavailable, match=r"READONLY|read only"):
            await state.execute(IDS, [Add(Scope.RUN, "n")])
        assert await state.execute(IDS, [Add(Scope.RUN, "n")]) == [1.0]  # on the new primary (it had nothing)
    finally:
        await state.close()
        await endpoint.down()
        await old.kill()
        await new.kill()
