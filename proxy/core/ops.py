"""The state operations detectors may ask for: the whole state vocabulary.

Detectors never hold run state themselves. They *plan* a few operations on
named fields, the guard runs every detector's plan as one batch against the
state backend (memory, or Redis in one round trip), and each detector then
*checks* its results. A batch runs atomically per scope, in order, so an
operation sees the effects of the ones before it.

Scopes:
  RUN        one run (X-Run-Id or inferred), expires when the run is idle
  THREAD     one conversation of a run: the run itself, unless the conversation is nested in it
             (a sub-agent's thread, see runguard.proxy.runs.nesting); the guard moves the RUN ops of a
             detector that judges one conversation (`Detector.per_thread`) here
  KEY        one API key (salted hash)
  KEY_MODEL  one API key and model (upstream health)
  KEY_DAY    one API key and UTC day (daily spend)
  RUN_TRACE  one run, remembered for days after its state was forgotten (`runs.remember_seconds`):
             the little that must outlive an idle pause, such as that the run was seen at all

Values are strings or floats; windows are bounded lists of short strings
(hashes, signatures), oldest first. Per-run state stays small because every
window has a `keep` bound and fields are few.

Every op has `renamed(field)`: the same op on another field (the engine puts
each detector's name before the fields it names). A method per class, built
field by field: `dataclasses.replace` inspects the class on every call, and
this runs for every op of every request.
"""

from __future__ import annotations

from enum import StrEnum

from runguard.proxy.core.frozen import frozen


class Scope(StrEnum):
    RUN = "run"
    THREAD = "thread"
    KEY = "key"
    KEY_MODEL = "key_model"
    KEY_DAY = "key_day"
    RUN_TRACE = "run_trace"


@frozen
class Add:
    """Add `amount` to a number (missing counts as 0). Result: the new value (float)."""

    scope: Scope
    field: str
    amount: float = 1.0

    def renamed(self, field: str) -> Add:
        return Add(self.scope, field, self.amount)


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

    def renamed(self, field: str) -> Push:
        return Push(self.scope, field, self.items, self.keep, self.unique, self.head)


@frozen
class Get:
    """Read a value. Result: str | float | tuple[str, ...] | None."""

    scope: Scope
    field: str

    def renamed(self, field: str) -> Get:
        return Get(self.scope, field)


@frozen
class Put:
    """Write a string value (`None` deletes the field). Result: the previous value."""

    scope: Scope
    field: str
    value: str | None

    def renamed(self, field: str) -> Put:
        return Put(self.scope, field, self.value)


@frozen
class PutNX:
    """Write a string value only if the field is absent. Result: the value now stored."""

    scope: Scope
    field: str
    value: str

    def renamed(self, field: str) -> PutNX:
        return PutNX(self.scope, field, self.value)


@frozen
class CompareAndSet:
    """Write `value` only if the field now equals `expected` (None: absent).

    Result: the value stored afterwards; it equals `value` when this write won.
    """

    scope: Scope
    field: str
    expected: str | None
    value: str

    def renamed(self, field: str) -> CompareAndSet:
        return CompareAndSet(self.scope, field, self.expected, self.value)


@frozen
class Raise:
    """Raise a number to at least `value` (missing counts as 0); a larger one stays. Result: the value after
    (float). A rebuild from the records merges with it: what the state counted beyond the records is kept."""

    scope: Scope
    field: str
    value: float

    def renamed(self, field: str) -> Raise:
        return Raise(self.scope, field, self.value)


Op = Add | Push | Get | Put | PutNX | CompareAndSet | Raise
OpResult = str | float | tuple[str, ...] | None
