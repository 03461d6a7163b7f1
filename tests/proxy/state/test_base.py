"""The StateBackend contract (state.base): one behaviour suite, run on every backend, so Redis must
answer exactly as memory does; and the ids and TTLs a request's scopes bind to.

Each test gets `make(ttls)`, which builds the backend under test; the Redis
one writes under a key prefix of the test's own, deleted afterwards.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from runguard.proxy.core.ops import Add, CompareAndSet, Get, Op, OpResult, Push, Put, PutNX, Raise, Scope
from runguard.proxy.state.base import ScopeIds, ScopeTtls, StateBackend
from runguard.proxy.state.memory import MemoryState
from tests.proxy.state.support import IDS, delete_prefix, redis_state
from tests.services import require_redis, unique_name

Make = Callable[..., StateBackend]
RUN, KEY, KEY_MODEL, KEY_DAY = Scope.RUN, Scope.KEY, Scope.KEY_MODEL, Scope.KEY_DAY


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def make(request: pytest.FixtureRequest) -> AsyncIterator[Make]:
    """make(ttls=None) -> a fresh backend of the parametrized kind; all closed (and Redis keys deleted) after."""
    made: list[StateBackend] = []
    url = require_redis() if request.param == "redis" else ""
    prefix = unique_name("rgtest_state")

    def build(ttls: ScopeTtls | None = None) -> StateBackend:
        backend: StateBackend = MemoryState(ttls=ttls) if not url else redis_state(url, prefix, ttls)
        made.append(backend)
        return backend

    yield build
    for backend in made:
        await backend.close()
    if url:
        await delete_prefix(url, prefix)


async def run(state: StateBackend, *ops: Op, ids: ScopeIds = IDS) -> list[OpResult]:
    return await state.execute(ids, ops)


async def test_empty_batch(make: Make) -> None:
    assert await make().execute(IDS, []) == []


async def test_add_sums_exactly_as_doubles(make: Make) -> None:
    state = make()
    assert await run(state, Add(RUN, "n"), Add(RUN, "n"), Add(RUN, "n", 0.5)) == [1.0, 2.0, 2.5]
    results = await run(state, Add(RUN, "c", 0.1), Add(RUN, "c", 0.2), Add(RUN, "c", -1e-9))
    assert results == [0.1, 0.1 + 0.2, 0.1 + 0.2 - 1e-9]  # bit for bit, not merely close
    assert all(type(value) is float for value in results)
    assert await run(state, Add(RUN, "big", 1e300), Add(RUN, "big", 1e300), Add(RUN, "neg", -3)) == [1e300, 2e300, -3.0]


async def test_add_over_a_string_or_window_starts_from_zero(make: Make) -> None:
    state = make()
    await run(state, Put(RUN, "s", "41"), Push(RUN, "w", ("a",), keep=3))
    assert await run(state, Add(RUN, "s", 2), Add(RUN, "w", 1)) == [2.0, 1.0]


async def test_raise_lifts_a_number_to_a_figure_and_keeps_a_larger_one(make: Make) -> None:
    state = make()
    assert await run(state, Raise(RUN, "n", 2.5), Add(RUN, "n", 1), Raise(RUN, "n", 3.0)) == [2.5, 3.5, 3.5]
    assert await run(state, Raise(RUN, "n", 0.1 + 0.2), Raise(RUN, "z", 0.0), Get(RUN, "z")) == [3.5, 0.0, 0.0]
    await run(state, Put(RUN, "s", "41"), Put(RUN, "t", "41"), Push(RUN, "w", ("a",), keep=2))
    # over a string or a window: from zero, as Add
    assert await run(state, Raise(RUN, "s", 2), Raise(RUN, "t", 0), Raise(RUN, "w", -1)) == [2.0, 0.0, 0.0]
    assert all(type(value) is float for value in await run(state, Raise(KEY_DAY, "usd", 1e300)))


async def test_push_keeps_the_last_items(make: Make) -> None:
    state = make()
    assert await run(state, Push(RUN, "w", ("a", "b"), keep=3)) == [("a", "b")]
    assert await run(state, Push(RUN, "w", ("c", "d"), keep=3)) == [("b", "c", "d")]
    assert await run(state, Push(RUN, "w", ("e",), keep=2)) == [("d", "e")]
    assert await run(state, Push(RUN, "w", ("x", "y", "z", "q"), keep=3)) == [("y", "z", "q")]
    assert await run(state, Push(RUN, "w", ("a", "a"), keep=5)) == [("y", "z", "q", "a", "a")]


async def test_push_unique_skips_items_already_held(make: Make) -> None:
    state = make()
    assert await run(state, Push(RUN, "u", ("a", "b", "a"), keep=5, unique=True)) == [("a", "b")]
    assert await run(state, Push(RUN, "u", ("b", "c"), keep=5, unique=True)) == [("a", "b", "c")]
    # once an item left the window it may come back
    assert await run(state, Push(RUN, "u", ("d", "e", "f"), keep=3, unique=True)) == [("d", "e", "f")]
    assert await run(state, Push(RUN, "u", ("a", "f"), keep=3, unique=True)) == [("e", "f", "a")]


async def test_push_head_keeps_the_first_items(make: Make) -> None:
    state = make()
    assert await run(state, Push(RUN, "h", ("a", "b"), keep=3, head=True)) == [("a", "b")]
    assert await run(state, Push(RUN, "h", ("c", "d"), keep=3, head=True)) == [("a", "b", "c")]
    assert await run(state, Push(RUN, "h", ("e",), keep=3, head=True)) == [("a", "b", "c")]
    both = Push(RUN, "hu", ("a", "a", "b", "c", "d"), keep=3, unique=True, head=True)
    assert await run(state, both) == [("a", "b", "c")]


async def test_push_edge_cases(make: Make) -> None:
    state = make()
    assert await run(state, Push(RUN, "e", (), keep=3), Get(RUN, "e")) == [(), ()]
    assert await run(state, Push(RUN, "z", ("a", "b"), keep=0)) == [()]
    await run(state, Add(RUN, "n"), Put(RUN, "s", "x"))
    assert await run(state, Push(RUN, "n", ("a",), keep=2), Push(RUN, "s", ("b",), keep=2)) == [("a",), ("b",)]
    odd = ("", "sx", "w[1]", "12", '"q"', "a/b\\c", "é漢🙂", "\x00\x01\n\t", "null")
    assert await run(state, Push(RUN, "odd", odd, keep=20), Get(RUN, "odd")) == [odd, odd]


async def test_get_gives_back_each_type(make: Make) -> None:
    state = make()
    await run(state, Add(RUN, "num", 3), Put(RUN, "str", "3"), Push(RUN, "win", ("3",), keep=2))
    num, text, window, missing = await run(state, Get(RUN, "num"), Get(RUN, "str"), Get(RUN, "win"), Get(RUN, "none"))
    assert (num, text, window, missing) == (3.0, "3", ("3",), None)
    assert (type(num), type(text), type(window)) == (float, str, tuple)


@pytest.mark.parametrize("value", ["", "s", "w", "w[]", "sw", "12.5", "-1", "inf", "nan", "[1,2]", "é漢🙂", "a\x00b"])
async def test_strings_that_look_like_other_types_stay_strings(make: Make, value: str) -> None:
    state = make()
    assert await run(state, Put(RUN, "f", value), Get(RUN, "f")) == [None, value]
    assert await state.read_scope(RUN, IDS.run) == {"f": value}


async def test_put_returns_the_previous_value_and_none_deletes(make: Make) -> None:
    state = make()
    assert await run(state, Put(RUN, "p", "one")) == [None]
    assert await run(state, Put(RUN, "p", "two")) == ["one"]
    assert await run(state, Put(RUN, "p", None), Get(RUN, "p")) == ["two", None]
    assert await run(state, Put(RUN, "p", None)) == [None]
    await run(state, Add(RUN, "n", 2), Push(RUN, "w", ("a",), keep=2))
    assert await run(state, Put(RUN, "n", "x"), Put(RUN, "w", "y"), Get(RUN, "n")) == [2.0, ("a",), "x"]


async def test_put_nx_writes_only_when_absent(make: Make) -> None:
    state = make()
    assert await run(state, PutNX(RUN, "x", "first"), PutNX(RUN, "x", "second")) == ["first", "first"]
    await run(state, Add(RUN, "n", 5), Push(RUN, "w", ("a",), keep=2))
    assert await run(state, PutNX(RUN, "n", "s"), PutNX(RUN, "w", "s")) == [5.0, ("a",)]


async def test_compare_and_set(make: Make) -> None:
    state = make()
    # expected None: wins only while the field is absent
    assert await run(state, CompareAndSet(RUN, "b", None, "open")) == ["open"]
    assert await run(state, CompareAndSet(RUN, "b", None, "other")) == ["open"]
    # a half-open probe: the first caller moves open -> probing, the second loses and sees the winner's value
    won = CompareAndSet(RUN, "b", "open", "probe:1")
    lost = CompareAndSet(RUN, "b", "open", "probe:2")
    assert await run(state, won, lost) == ["probe:1", "probe:1"]
    assert await run(state, CompareAndSet(RUN, "b", "probe:1", "closed"), Get(RUN, "b")) == ["closed", "closed"]
    # a number or window never equals an expected string
    await run(state, Add(RUN, "n", 1), Push(RUN, "w", ("1",), keep=2))
    assert await run(state, CompareAndSet(RUN, "n", "1", "x"), CompareAndSet(RUN, "w", "1", "x")) == [1.0, ("1",)]
    assert await run(state, CompareAndSet(RUN, "n", None, "x")) == [1.0]


async def test_a_batch_runs_in_order_and_sees_its_own_writes(make: Make) -> None:
    state = make()
    ops = (
        Get(RUN, "f"),
        Add(RUN, "f", 2),
        Get(RUN, "f"),
        Put(RUN, "f", "text"),
        Get(RUN, "f"),
        Push(RUN, "f", ("a",), keep=2),
        PutNX(RUN, "f", "no"),
        Put(RUN, "f", None),
        PutNX(RUN, "f", "yes"),
        CompareAndSet(RUN, "f", "yes", "done"),
    )
    assert await run(state, *ops) == [None, 2.0, 2.0, 2.0, "text", ("a",), ("a",), ("a",), "yes", "done"]


async def test_one_batch_on_every_scope_keeps_the_original_order(make: Make) -> None:
    state = make()
    ops = (
        Add(RUN, "n"),
        Add(KEY, "n", 10),
        Put(KEY_MODEL, "n", "km"),
        Add(RUN, "n"),
        Push(KEY_DAY, "n", ("d",), keep=2),
        Get(KEY, "n"),
        Get(KEY_MODEL, "n"),
        Get(RUN, "n"),
    )
    assert await run(state, *ops) == [1.0, 10.0, None, 2.0, ("d",), 10.0, "km", 2.0]
    assert await state.read_scope(KEY_DAY, IDS.key_day) == {"n": ("d",)}
    assert await state.read_scope(KEY, IDS.key) == {"n": 10.0}


async def test_ids_keep_scopes_apart(make: Make) -> None:
    state = make()
    other = ScopeIds(run="run-2", key=IDS.key, key_model=IDS.key_model, key_day=IDS.key_day)
    await run(state, Add(RUN, "n"), Add(KEY, "n"))
    assert await run(state, Add(RUN, "n"), Add(KEY, "n"), ids=other) == [1.0, 2.0]
    assert await state.read_scope(RUN, "run-1") == {"n": 1.0}
    assert await state.read_scope(RUN, "run-2") == {"n": 1.0}


async def test_read_scope_and_clear_scope(make: Make) -> None:
    state = make()
    assert await state.read_scope(RUN, IDS.run) == {}
    await run(state, Add(RUN, "n", 1.5), Put(RUN, "s", "v"), Push(RUN, "w", ("a", "b"), keep=4), Add(KEY, "k"))
    assert await state.read_scope(RUN, IDS.run) == {"n": 1.5, "s": "v", "w": ("a", "b")}
    assert await state.clear_scope(RUN, IDS.run) is True
    assert await state.read_scope(RUN, IDS.run) == {}
    assert await state.clear_scope(RUN, IDS.run) is False
    assert await state.read_scope(KEY, IDS.key) == {"k": 1.0}  # other scopes untouched
    assert await run(state, Get(RUN, "n"), Add(RUN, "n")) == [None, 1.0]


async def test_ids_ending_finds_a_run_s_state_ids_whatever_glob_characters_they_hold(make: Make) -> None:
    state = make()
    names = ["k_a/demo", "team.b/demo", "k_c/x/demo", "k_d/demo*[1]", "k_e/other"]
    for name in names:
        await run(state, Add(RUN, "n"), ids=dataclasses.replace(IDS, run=name))
    await run(state, Add(KEY, "n"), ids=dataclasses.replace(IDS, key="k_f/demo"))  # another scope
    assert sorted(await state.ids_ending(RUN, "/demo")) == ["k_a/demo", "k_c/x/demo", "team.b/demo"]
    assert await state.ids_ending(RUN, "/demo*[1]") == ["k_d/demo*[1]"]
    await state.clear_scope(RUN, "k_a/demo")
    assert sorted(await state.ids_ending(RUN, "/demo")) == ["k_c/x/demo", "team.b/demo"]


async def test_a_scope_expires_after_its_ttl_of_inactivity(make: Make) -> None:
    state = make(ScopeTtls(run=0.3, key=30.0))
    await run(state, Add(RUN, "n"), Add(KEY, "n"))
    for _ in range(3):  # every batch that touches the run refreshes its TTL, reads included
        await asyncio.sleep(0.15)
        await run(state, Get(RUN, "n"))
    assert await run(state, Get(RUN, "n")) == [1.0]
    await asyncio.sleep(0.45)
    assert await state.read_scope(RUN, IDS.run) == {}
    assert await run(state, Get(RUN, "n"), Get(KEY, "n")) == [None, 1.0]


async def test_a_run_s_trace_outlives_its_state_and_shares_its_id(make: Make) -> None:
    state = make(ScopeTtls.of_runs(idle_seconds=0.2, remember_seconds=30.0))
    assert await run(state, Add(RUN, "n"), Put(Scope.RUN_TRACE, "seen", "1")) == [1.0, None]
    await asyncio.sleep(0.35)
    assert await run(state, Get(RUN, "n"), Put(Scope.RUN_TRACE, "seen", "1")) == [None, "1"]
    assert await state.read_scope(Scope.RUN_TRACE, IDS.run) == {"seen": "1"}


async def test_remember_and_recall(make: Make) -> None:
    state = make()
    assert await state.recall("resp:none") is None
    await state.remember("resp:1", "run-1", 30.0)
    await state.remember("resp:2", "é漢 \x00", 0.3)
    assert await state.recall("resp:1") == "run-1"
    assert await state.recall("resp:2") == "é漢 \x00"
    await state.remember("resp:1", "run-9", 30.0)
    assert await state.recall("resp:1") == "run-9"
    await asyncio.sleep(0.45)
    assert await state.recall("resp:2") is None
    assert await state.recall("resp:1") == "run-9"


async def test_claim_is_taken_once_until_it_expires(make: Make) -> None:
    state = make()
    outcomes = await asyncio.gather(*(state.claim("polled:resp_1", 0.3) for _ in range(10)))  # Redis: 10 connections
    assert outcomes.count(True) == 1
    assert await state.claim("polled:resp_2", 30.0) is True  # another name: a claim of its own
    await asyncio.sleep(0.45)
    assert await state.claim("polled:resp_1", 0.3) is True  # expired: taken again
    assert await state.claim("polled:resp_2", 30.0) is False
    assert await state.recall("resp_1") is None  # a claim is no remembered value of another name


async def test_ping(make: Make) -> None:
    assert await make().ping() is True


def test_each_scope_binds_to_its_own_id_and_a_run_s_trace_to_the_run_s() -> None:
    ids = ScopeIds(run="r", key="k", key_model="k:m", key_day="k:d", thread="r/t1")
    assert [ids.of(scope) for scope in (RUN, KEY, KEY_MODEL, KEY_DAY, Scope.THREAD, Scope.RUN_TRACE)] == [
        "r",
        "k",
        "k:m",
        "k:d",
        "r/t1",
        "r",
    ]


def test_the_ttls_of_runs_follow_the_runs_settings_and_the_rest_keep_their_defaults() -> None:
    ttls = ScopeTtls.of_runs(idle_seconds=600.0, remember_seconds=86400.0)
    assert (ttls.of(RUN), ttls.of(Scope.THREAD), ttls.of(Scope.RUN_TRACE)) == (600.0, 600.0, 86400.0)
    assert (ttls.of(KEY), ttls.of(KEY_MODEL), ttls.of(KEY_DAY)) == (86400.0, 86400.0, 2 * 86400.0)
