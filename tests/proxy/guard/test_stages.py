"""The stage totals a passage adds to, and the CPU a stage counts: its own steps, not the loop's work while it waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from runguard.proxy.guard.stages import Stages, own_cpu

T = TypeVar("T")


def test_totals_start_at_zero_and_read_by_stage_name() -> None:
    stages = Stages()
    assert stages.seconds() == {"admission": 0.0, "judging": 0.0}
    stages.admitted(0.25)
    stages.judged(0.5)
    stages.judged(0.25)
    assert stages.seconds() == {"admission": 0.25, "judging": 0.75}


def _burn(seconds: float) -> None:
    """Use `seconds` of this thread's CPU."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def _timed(work: Coroutine[Any, Any, T], spent: list[float]) -> T:
    return await own_cpu(work, spent.append)


async def test_a_stage_counts_its_own_steps_and_not_what_the_loop_ran_while_it_waited() -> None:
    waiting, answered = asyncio.Event(), asyncio.Event()

    async def stage() -> str:  # a request's admission over a state backend that waits (Redis)
        _burn(0.005)
        waiting.set()
        await answered.wait()  # the round trip
        _burn(0.005)
        return "ticket"

    async def other_requests() -> None:
        await waiting.wait()
        _burn(0.05)  # the loop serves others while the stage waits
        answered.set()

    spent: list[float] = []
    ticket, _ = await asyncio.gather(_timed(stage(), spent), other_requests())
    assert ticket == "ticket"
    assert len(spent) == 1
    assert 0.01 <= spent[0] < 0.03  # its two steps; around the whole await it would be over 0.06


async def test_a_stage_that_never_waits_is_one_step() -> None:
    async def stage() -> int:
        _burn(0.002)
        return 7

    spent: list[float] = []
    assert await _timed(stage(), spent) == 7
    assert len(spent) == 1 and spent[0] >= 0.002


async def test_a_failing_stage_raises_and_still_counts() -> None:
    async def stage() -> None:
        await asyncio.sleep(0)
        _burn(0.002)
        raise ValueError("state full")

    spent: list[float] = []
    with pytest.raises(ValueError, match="state full"):
        await _timed(stage(), spent)
    assert len(spent) == 1 and spent[0] >= 0.002


async def test_a_cancelled_stage_sees_its_cancellation_and_still_counts() -> None:
    waiting, cleaned_up = asyncio.Event(), asyncio.Event()

    async def stage() -> None:
        try:
            waiting.set()
            await asyncio.Event().wait()  # a round trip that never answers: the client left meanwhile
        finally:
            cleaned_up.set()  # what a stage gives back when cancelled (an in-flight slot) runs

    spent: list[float] = []
    task = asyncio.ensure_future(_timed(stage(), spent))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned_up.is_set()
    assert len(spent) == 1
