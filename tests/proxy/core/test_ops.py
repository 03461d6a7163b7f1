"""`Op.renamed`: an op moved to another field keeps everything else."""

from __future__ import annotations

import dataclasses

import pytest

from runguard.proxy.core.ops import Add, CompareAndSet, Get, Op, Push, Put, PutNX, Raise, Scope

OPS: list[Op] = [
    Add(Scope.KEY_DAY, "usd", 0.25),
    Push(Scope.RUN, "seq", ("a", "b"), keep=5, unique=True, head=True),
    Get(Scope.KEY, "breaker"),
    Put(Scope.RUN, "last", None),
    PutNX(Scope.RUN, "first", "x"),
    CompareAndSet(Scope.KEY_MODEL, "probe", expected=None, value="p1"),
    Raise(Scope.RUN, "requests", 4.0),
]


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_renamed_changes_only_the_field(op: Op) -> None:
    moved = op.renamed("spiral.seq")
    assert type(moved) is type(op)
    assert moved == dataclasses.replace(op, field="spiral.seq")
    assert moved != op


def test_every_op_kind_is_covered() -> None:
    assert {type(op) for op in OPS} == set(Op.__args__)  # type: ignore[attr-defined]
