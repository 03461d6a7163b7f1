"""Capped per-name counters."""

from __future__ import annotations

from runguard.detectors.support import tally
from runguard.proxy.core.ops import Push, Scope


def test_known_names_are_admitted_and_new_ones_while_there_is_room() -> None:
    admitted, new = tally.admit(("a", "b"), ["b", "c", "d", "c"], cap=3)
    assert admitted == ["b", "c"]
    assert new == ["c"]


def test_nothing_stored_yet() -> None:
    assert tally.admit(None, ["a", "b"], cap=8) == (["a", "b"], ["a", "b"])


def test_enrol_pushes_new_names_once_first_come_first_kept() -> None:
    assert tally.enrol("roster", [], cap=4) == []
    (op,) = tally.enrol("roster", ["x"], cap=4)
    assert op == Push(Scope.RUN, "roster", ("x",), keep=4, unique=True, head=True)
