"""The ends judged beside the relay: a run's next request waits for its run's pending ends and no other run's;
past the limit the end is handed back; shutdown waits for what is left, then gives up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from runguard.proxy.guard.judging import Judging


def _end(log: list[str], name: str, gate: asyncio.Event | None = None) -> Callable[[], Awaitable[None]]:
    async def work() -> None:
        log.append(f"{name} start")
        if gate is not None:
            await gate.wait()
        log.append(f"{name} done")

    return work


async def test_a_runs_next_request_waits_for_its_pending_ends_only() -> None:
    judging, log = Judging(), list[str]()
    gate_a, gate_b = asyncio.Event(), asyncio.Event()
    assert judging.submit("run-a", _end(log, "a1", gate_a))
    assert judging.submit("run-b", _end(log, "b1", gate_b))
    assert log == []  # started in tasks of their own, not in the handler that submitted them
    await asyncio.sleep(0)
    assert log == ["a1 start", "b1 start"]
    assert len(judging) == 2

    waiting = asyncio.ensure_future(judging.settled("run-a"))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # run-a's verdict is pending
    await asyncio.wait_for(judging.settled("run-c"), 0.5)  # another run: nothing to wait for
    gate_a.set()
    await asyncio.wait_for(waiting, 1)
    assert "a1 done" in log and "b1 done" not in log  # run-a's wait did not wait for run-b
    assert len(judging) == 1

    gate_b.set()
    await judging.close(5)  # every end counted so far has run
    assert len(judging) == 0


async def test_an_end_counted_before_it_starts_is_waited_for() -> None:
    """The passage counts its end (`open`) before it writes what finds a follow-up its run, then starts the
    rest: the run's next request, arriving in between, waits for all of it."""
    judging, log = Judging(), list[str]()
    end = judging.open("run-a")
    assert end is not None
    waiting = asyncio.ensure_future(judging.settled("run-a"))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    judging.start(end, _end(log, "rest"))
    await asyncio.wait_for(waiting, 1)
    assert log == ["rest start", "rest done"]


async def test_a_waiter_cancelled_leaves_the_end_running() -> None:
    judging, log = Judging(), list[str]()
    gate = asyncio.Event()
    judging.submit("run-a", _end(log, "a1", gate))
    waiting = asyncio.ensure_future(judging.settled("run-a"))
    await asyncio.sleep(0.01)
    waiting.cancel()  # the next request's client left
    await asyncio.sleep(0)
    gate.set()
    await judging.close(5)  # every end counted so far has run
    assert log == ["a1 start", "a1 done"]


async def test_past_the_limit_the_end_is_handed_back() -> None:
    judging, log = Judging(limit=2), list[str]()
    assert judging.submit("a", _end(log, "1"))
    assert judging.submit("b", _end(log, "2"))
    assert not judging.submit("c", _end(log, "3"))  # the passage runs this one in its handler
    await judging.close(5)  # every end counted so far has run
    assert sorted(log) == ["1 done", "1 start", "2 done", "2 start"]
    assert judging.submit("c", _end(log, "3"))  # room again
    await judging.close(5)  # every end counted so far has run


async def test_a_failing_end_is_logged_and_counted_as_finished(caplog: pytest.LogCaptureFixture) -> None:
    judging = Judging()

    async def broken() -> None:
        raise RuntimeError("boom")

    judging.submit("a", broken)
    with caplog.at_level(logging.ERROR, logger="runguard.guard"):
        await judging.settled("a")
        await asyncio.sleep(0)
    assert "judging a response failed" in caplog.text
    assert len(judging) == 0


async def test_close_waits_for_what_is_left_then_cancels_it(caplog: pytest.LogCaptureFixture) -> None:
    judging, log = Judging(), list[str]()
    judging.submit("a", _end(log, "left"))
    await judging.close(1.0)
    assert log == ["left start", "left done"]

    stuck = Judging()
    stuck.submit("a", _end(log, "stuck", asyncio.Event()))
    with caplog.at_level(logging.ERROR, logger="runguard.guard"):
        await stuck.close(0.05)
    assert "1 ends not finished at shutdown" in caplog.text
    for _ in range(3):  # the cancellation is delivered, then the task's done callbacks run
        await asyncio.sleep(0)
    assert len(stuck) == 0  # cancelled


async def test_an_end_counted_and_ended_by_hand_holds_its_run_s_next_request_until_then() -> None:
    """The in-memory state's mark of a stream ending: `open` when its last event goes out, its result set once
    its end has run (no task of the judging's own)."""
    ends = Judging()
    end = ends.open("tenant/run-a")
    assert end is not None
    waiting = asyncio.ensure_future(ends.settled("tenant/run-a", 2.0))
    await ends.settled("tenant/run-b")  # another run waits on nothing
    await asyncio.sleep(0)
    assert not waiting.done()
    end.set_result(None)
    await waiting
    await ends.settled("tenant/run-a")  # nothing pending any more
    assert len(ends) == 0


async def test_an_end_that_never_comes_holds_a_bounded_wait_for_at_most_its_bound() -> None:
    ends = Judging()
    assert ends.open("tenant/run-a") is not None
    await asyncio.wait_for(ends.settled("tenant/run-a", 0.01), 1.0)
