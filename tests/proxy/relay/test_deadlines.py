from __future__ import annotations

import asyncio

import pytest

from runguard.proxy.relay.deadlines import Deadlines


async def _wait(deadlines: Deadlines, done: asyncio.Future[None]) -> bool:
    """Wait for `done` under a deadline; True if the deadline passed first."""
    task = deadlines.start()
    try:
        await done
    except asyncio.CancelledError:
        if deadlines.stop(task, cancelled=True):
            return True
        raise
    deadlines.stop(task, cancelled=False)
    return False


async def test_a_wait_past_its_deadline_times_out_within_a_tenth_of_the_timeout() -> None:
    deadlines = Deadlines(0.2)
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await _wait(deadlines, loop.create_future())
    assert 0.2 <= loop.time() - began < 0.2 * 1.1 + 0.05
    assert deadlines.waiting == 0


async def test_waits_that_end_in_time_leave_nothing_to_cancel_and_the_timer_stops() -> None:
    deadlines = Deadlines(0.1)
    loop = asyncio.get_running_loop()
    for _ in range(3):
        done = loop.create_future()
        loop.call_later(0.01, done.set_result, None)
        assert not await _wait(deadlines, done)
    assert deadlines.waiting == 0
    await asyncio.sleep(0.25)  # past every deadline: a late cancellation would raise here


async def test_only_the_waits_past_due_time_out_the_younger_ones_go_on() -> None:
    deadlines = Deadlines(0.3)
    loop = asyncio.get_running_loop()
    old = asyncio.ensure_future(_wait(deadlines, loop.create_future()))
    await asyncio.sleep(0.15)
    young_done = loop.create_future()
    young = asyncio.ensure_future(_wait(deadlines, young_done))
    assert await old  # timed out
    assert not young.done()
    young_done.set_result(None)
    assert not await young


async def test_a_cancellation_from_elsewhere_is_not_a_timeout() -> None:
    deadlines = Deadlines(5.0)
    waiting = asyncio.ensure_future(_wait(deadlines, asyncio.get_running_loop().create_future()))
    await asyncio.sleep(0.01)
    waiting.cancel()  # the client left
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert deadlines.waiting == 0
