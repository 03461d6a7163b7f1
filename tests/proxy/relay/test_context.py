"""The context every provider handler shares: the names its headers give, where long conversations keep their
checkpoints, and the work it finishes after a client left or while the server stops."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from runguard.proxy.providers.common.history import HistoryCache
from runguard.proxy.relay.context import ProxyContext
from tests.support.guards import guard_settings, make_context, make_guard


@pytest.fixture
def ctx() -> ProxyContext:
    settings = guard_settings()
    return make_context(settings, make_guard(settings))


def test_the_run_and_agent_headers_are_read_as_text(ctx: ProxyContext) -> None:
    headers = CIMultiDictProxy(CIMultiDict({"X-Run-Id": "nightly-7", "X-Agent-Name": "planner"}))
    assert ctx.names(headers) == ("nightly-7", "planner")
    assert ctx.names(CIMultiDictProxy(CIMultiDict())) == (None, None)


def test_runguard_s_own_headers_include_the_run_agent_and_limit_headers(ctx: ProxyContext) -> None:
    own = {name.lower() for name in ctx.own_headers}
    assert {"x-run-id", "x-agent-name", "x-runguard-max-requests", "x-runguard-budget-usd"} <= own


def test_only_a_long_conversation_gets_a_checkpoint_slot(ctx: ProxyContext) -> None:
    assert ctx.slot("k_a", "run", b"x" * 1_000_000) is None  # no cache: every request is read whole
    cached = dataclasses.replace(ctx, history=HistoryCache(1 << 20, min_body=100))
    assert cached.slot("k_a", "run", b"x" * 99) is None
    slot = cached.slot("k_a", None, b"x" * 100)
    assert slot is not None and slot.cache is cached.history


async def test_spawned_work_is_held_until_it_is_done(ctx: ProxyContext) -> None:
    done = asyncio.Event()

    async def work() -> None:
        await asyncio.sleep(0.01)
        done.set()

    ctx.spawn(work())
    assert len(ctx.background) == 1
    await asyncio.wait_for(done.wait(), 1)
    await asyncio.sleep(0)
    assert not ctx.background


async def test_settled_work_runs_to_its_end_though_its_handler_is_cancelled(ctx: ProxyContext) -> None:
    started, finished = asyncio.Event(), asyncio.Event()

    async def accounting() -> None:
        started.set()
        await asyncio.sleep(0.02)
        finished.set()

    handler = asyncio.ensure_future(ctx.settle(accounting()))
    await started.wait()
    handler.cancel()  # the client closed its connection the moment it had its answer
    with pytest.raises(asyncio.CancelledError):
        await handler
    await asyncio.wait_for(finished.wait(), 1)


async def test_with_a_state_that_never_waits_settled_work_runs_in_place(ctx: ProxyContext) -> None:
    in_place = dataclasses.replace(ctx, state_never_waits=True)
    ran: list[str] = []

    async def accounting() -> None:
        ran.append("done")

    await in_place.settle(accounting())
    assert ran == ["done"] and not in_place.background


async def test_stopping_ends_the_handlers_still_reading_a_body(ctx: ProxyContext) -> None:
    reading = asyncio.ensure_future(asyncio.sleep(10))
    ctx.reading.add(reading)
    ctx.stop_reading()
    assert ctx.stopping.is_set()
    with pytest.raises(asyncio.CancelledError):
        await reading
