"""The state operations detectors may ask for: the whole state vocabulary.

Detectors never hold run state themselves. They *plan* a few operations on
named fields, the guard runs every detector's plan as one batch against the
state backend (memory, or Redis in one round trip), and each detector then
*checks* its results. A batch runs atomically per scope, in order, so an
operation sees the effects of the ones before it.

Scopes:
  RUN        one run (X-Run-Id or inferred), expires when the run is idle
  KEY        one API key (salted hash)
  KEY_MODEL  one API key and model (upstream health)
  KEY_DAY    one API key and UTC day (daily spend)

Values are strings or floats; windows are bounded lists of short strings
(hashes, signatures), oldest first. Per-run state stays small because every
window has a `keep` bound and fields are few.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from runguard.detectors.frozen import frozen


class Scope(StrEnum):
    RUN = "run"
    KEY = "key"
    KEY_MODEL = "key_model"
    KEY_DAY = "key_day"


@frozen
class Add:
    """Add `amount` to a number (missing counts as 0). Result: the new value (float)."""

    scope: Scope
    field: str
    amount: float = 1.0


@frozen
class Push:
    """Append items to a window. Result: the window after (tuple[str, ...]).

    By default the window keeps its last `keep` items. `unique` skips items the
    window already holds (so a re-sent request cannot count twice). `head`
    keeps the *first* `keep` items: once full, nothing more is appended.
    """

    scope: Scope
    field: str
    items: tuple[str, ...]
    keep: int
    unique: bool = False
    head: bool = False


@frozen
class Get:
    """Read a value. Result: str | float | tuple[str, ...] | None."""

    scope: Scope
    field: str


@frozen
class Put:
    """Write a string value (`None` deletes the field). Result: the previous value."""

    scope: Scope
    field: str
    value: str | None


@frozen
class PutNX:
    """Write a string value only if the field is absent. Result: the value now stored."""

    scope: Scope
    field: str
    value: str


@frozen
class CompareAndSet:
    """Write `value` only if the field now equals `expected` (None: absent).

    Result: the value stored afterwards; it equals `value` when this write won.
    """

    scope: Scope
    field: str
    expected: str | None
    value: str


Op = Add | Push | Get | Put | PutNX | CompareAndSet
OpResult = str | float | tuple[str, ...] | None


def renamed(op: Op, field: str) -> Op:
    """`op` on another field (the guard prefixes each detector's fields with its name).

    Built field by field, by a function found by the op's exact type:
    `dataclasses.replace` inspects the class on every call, a `match` tries the
    classes one by one, and this runs for every op of every request.
    """
    rename = _RENAME.get(type(op))
    if rename is None:
        raise TypeError(f"unknown state op {op!r}")
    return rename(op, field)


def _add(op: Add, field: str) -> Add:
    return Add(op.scope, field, op.amount)


def _push(op: Push, field: str) -> Push:
    return Push(op.scope, field, op.items, op.keep, op.unique, op.head)


def _get(op: Get, field: str) -> Get:
    return Get(op.scope, field)


def _put(op: Put, field: str) -> Put:
    return Put(op.scope, field, op.value)


def _put_nx(op: PutNX, field: str) -> PutNX:
    return PutNX(op.scope, field, op.value)


def _compare_and_set(op: CompareAndSet, field: str) -> CompareAndSet:
    return CompareAndSet(op.scope, field, op.expected, op.value)


_RENAME: dict[type, Callable[[Any, str], Op]] = {
    Add: _add,
    Push: _push,
    Get: _get,
    Put: _put,
    PutNX: _put_nx,
    CompareAndSet: _compare_and_set,
}
