"""MemoryState on its own: what it holds stays out of the garbage collector's work."""

from __future__ import annotations

import gc

from runguard.proxy.core.ops import Add, Op, Push, Put, Scope
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState


def _ids(run: int) -> ScopeIds:
    return ScopeIds(run=f"run-{run}", key="k", key_model="k:m", key_day="k:2026-11-23")


async def _fill(state: MemoryState, runs: int) -> None:
    for run in range(runs):
        ops: list[Op] = [
            Add(Scope.RUN, "requests"),
            Push(Scope.RUN, "w.calls", (f"c{run}", "c"), keep=4),
            Push(Scope.RUN, "w.agents", ("planner",), keep=8, unique=True),
            Put(Scope.RUN, "last", f"v{run}"),
        ]
        await state.execute(_ids(run), ops)


async def test_thousands_of_runs_add_no_objects_for_the_collector_to_walk() -> None:
    """A full collection's work grows with tracked objects; 100k live runs must not make every one slow."""
    state = MemoryState(max_scopes=10_000)
    await _fill(state, 100)  # the backend's own containers exist from here on
    gc.collect()
    before = len(gc.get_objects())
    await _fill(state, 3_000)
    gc.collect()
    assert len(state) == 3_000
    assert len(gc.get_objects()) - before < 100  # was ~14 per run: lists of windows, slot objects, dicts


async def test_windows_come_back_as_tuples_after_every_kind_of_push() -> None:
    state = MemoryState()
    ids = _ids(1)
    first = await state.execute(ids, [Push(Scope.RUN, "w", ("a", "b", "c"), keep=2)])
    unique = await state.execute(ids, [Push(Scope.RUN, "u", ("a", "a", "b"), keep=5, unique=True)])
    head = await state.execute(ids, [Push(Scope.RUN, "h", ("a", "b", "c"), keep=2, head=True)])
    assert (first, unique, head) == ([("b", "c")], [("a", "b")], [("a", "b")])
    assert await state.read_scope(Scope.RUN, "run-1") == {"w": ("b", "c"), "u": ("a", "b"), "h": ("a", "b")}
