"""The guard's state batches: results or None, the degraded mark, and undos for batches that ran for nobody."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.ops import Add, Get, Op, OpResult, Scope
from runguard.proxy.guard.batches import Batches
from runguard.proxy.guard.ticket import scope_ids
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState

IDS = scope_ids("k_a/run-1", "k_a", "gpt-4o-mini", 1_000_000.0)
TAKE, GIVE_BACK, READ = [Add(Scope.RUN, "slots", 1)], [Add(Scope.RUN, "slots", -1)], [Get(Scope.RUN, "slots")]


class FlakyState(MemoryState):
    """The in-memory state, as a networked one: it waits, and can fail or lose the reply of its next batch."""

    never_waits = False

    def __init__(self) -> None:
        super().__init__()
        self.fail = 0  # batches that fail without running
        self.lose = 0  # batches that run, but whose reply is lost
        self.delay = 0.0
        self.started = asyncio.Event()  # a batch has reached the state

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        self.started.set()
        await asyncio.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            raise StateUnavailable("down (test)")
        if self.lose:
            self.lose -= 1
            ran = asyncio.ensure_future(super().execute(ids, ops))
            raise StateUnavailable("reply lost (test)", pending=ran)
        return await super().execute(ids, ops)


class Clock:
    now = 50.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def state() -> FlakyState:
    return FlakyState()


@pytest.fixture
def errors() -> list[int]:
    return []


@pytest.fixture
def batches(state: FlakyState, errors: list[int]) -> Batches:
    return Batches(state, fail_closed=False, clock=Clock(), on_error=lambda: errors.append(1))


async def slots(batches: Batches) -> float:
    got = await batches.execute(IDS, READ)
    assert got is not None
    return float(got[0] or 0)


async def test_a_failed_batch_is_none_marks_the_guard_degraded_until_one_answers(
    batches: Batches, state: FlakyState, errors: list[int]
) -> None:
    assert await batches.execute(IDS, TAKE) == [1]
    state.fail = 2
    assert await batches.execute(IDS, TAKE) is None
    assert batches.degraded_since == 50.0
    assert await batches.execute(IDS, TAKE) is None
    assert batches.degraded_since == 50.0 and errors == [1, 1]  # marked once, every failure counted
    assert await batches.execute(IDS, TAKE) == [2]
    assert batches.degraded_since is None


async def test_a_batch_whose_reply_was_lost_is_undone_once_it_is_known_to_have_run(
    batches: Batches, state: FlakyState
) -> None:
    state.lose = 1
    assert await batches.execute(IDS, TAKE, undo=GIVE_BACK) is None
    await batches.settle(1.0)
    assert await slots(batches) == 0


async def test_a_lost_batch_without_undo_stays_done(batches: Batches, state: FlakyState) -> None:
    state.lose = 1
    assert await batches.execute(IDS, TAKE) is None
    await batches.settle(1.0)
    await asyncio.sleep(0.01)
    assert await slots(batches) == 1


async def test_a_batch_whose_caller_left_runs_to_its_end_and_is_undone(batches: Batches, state: FlakyState) -> None:
    state.delay = 0.02
    caller = asyncio.ensure_future(batches.execute(IDS, TAKE, undo=GIVE_BACK))
    await state.started.wait()
    caller.cancel()  # the client left while its slot was being taken
    with pytest.raises(asyncio.CancelledError):
        await caller
    await batches.settle(1.0)  # the batch ran to its end, then its undo
    state.delay = 0.0
    assert await slots(batches) == 0


async def test_work_to_the_end_hands_what_it_took_to_whoever_cleans_up(batches: Batches) -> None:
    left: list[int] = []

    async def work() -> int:
        await asyncio.sleep(0.01)
        return 7

    caller = asyncio.ensure_future(batches.to_the_end(work(), lambda running: left.append(1)))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert left == [1]
    assert await batches.to_the_end(work(), lambda running: left.append(2)) == 7 and left == [1]


def test_never_waits_is_the_state_s(batches: Batches) -> None:
    assert not batches.never_waits
    assert Batches(MemoryState(), fail_closed=True, clock=Clock(), on_error=lambda: None).never_waits
