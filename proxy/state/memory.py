"""In-process state: the default backend, one process, nothing to set up.

Scopes live in an LRU-ordered dict with a deadline each; a batch never awaits,
so it is atomic under asyncio. Expired scopes are dropped as the oldest end of
the LRU order is passed, and the number of scopes is capped so memory stays
bounded however many runs come and go.

What a scope holds is kept out of the garbage collector's sight: windows are
tuples of strings and deadlines sit in a dict of floats, so a scope's fields
are a dict of atomic values, which CPython stops tracking. Held as lists and
slot objects, 100k runs were over a million tracked objects, and every full
collection walked them all (20 us per request on average, in pauses that grow
with the number of runs).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from runguard.proxy.core.ops import Add, CompareAndSet, Get, Op, OpResult, Push, Put, PutNX, Raise, Scope
from runguard.proxy.state.base import ScopeIds, ScopeTtls

Fields = dict[str, str | float | tuple[str, ...]]


def _add(fields: Fields, op: Add) -> OpResult:
    current = fields.get(op.field)
    value = (current if isinstance(current, float) else 0.0) + op.amount
    fields[op.field] = value
    return value


def _push(fields: Fields, op: Push) -> OpResult:
    current = fields.get(op.field)
    window: tuple[str, ...] = current if isinstance(current, tuple) else ()
    keep = op.keep
    if op.unique or op.head:
        grown = list(window)
        for item in op.items:
            if (op.unique and item in grown) or (op.head and len(grown) >= keep):
                continue
            grown.append(item)
        window = tuple(grown)
    else:
        window += tuple(op.items)
    if len(window) > keep:
        window = window[len(window) - keep :]
    fields[op.field] = window
    return window


def _get(fields: Fields, op: Get) -> OpResult:
    return fields.get(op.field)


def _put(fields: Fields, op: Put) -> OpResult:
    current = fields.get(op.field)
    if op.value is None:
        fields.pop(op.field, None)
    else:
        fields[op.field] = op.value
    return current


def _put_nx(fields: Fields, op: PutNX) -> OpResult:
    current = fields.get(op.field)
    if current is None:
        fields[op.field] = op.value
        return op.value
    return current


def _compare_and_set(fields: Fields, op: CompareAndSet) -> OpResult:
    current = fields.get(op.field)
    if current == op.expected:
        fields[op.field] = op.value
        return op.value
    return current


def _raise(fields: Fields, op: Raise) -> OpResult:
    current = fields.get(op.field)
    value = max(current if isinstance(current, float) else 0.0, op.value)
    fields[op.field] = value
    return value


# One function per op type, found by the op's exact type: cheaper than a `match` over
# six class patterns, and this runs for every op of every request.
_APPLY: dict[type, Callable[[Fields, Any], OpResult]] = {
    Add: _add,
    Push: _push,
    Get: _get,
    Put: _put,
    PutNX: _put_nx,
    CompareAndSet: _compare_and_set,
    Raise: _raise,
}


class MemoryState:
    """`StateBackend` in this process's memory."""

    never_waits = True  # a subclass that awaits (a test's slow state) must say so

    def __init__(
        self,
        ttls: ScopeTtls | None = None,
        max_scopes: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        ttls = ttls or ScopeTtls()
        self._ttl = {scope: ttls.of(scope) for scope in Scope}  # read for every scope of every batch
        self._max = max_scopes
        self._clock = clock
        self._slots: OrderedDict[str, Fields] = OrderedDict()  # least recently used first
        self._deadlines: dict[str, float] = {}
        self._plain: OrderedDict[str, tuple[float, str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._slots)

    def _evict(self, now: float) -> None:
        slots, deadlines = self._slots, self._deadlines
        while slots:
            name = next(iter(slots))
            if deadlines[name] > now and len(slots) <= self._max:
                break
            del slots[name], deadlines[name]

    def _fields(self, scope: Scope, scope_id: str, now: float) -> Fields:
        name = f"{scope}:{scope_id}"  # a Scope formats as its value (StrEnum)
        fields = self._slots.get(name)
        if fields is None or self._deadlines[name] <= now:
            fields = self._slots[name] = {}
        else:
            self._slots.move_to_end(name)
        self._deadlines[name] = now + self._ttl[scope]
        return fields

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        now = self._clock()
        scopes: dict[Scope, Fields] = {}  # each scope looked up once per batch, not once per op
        results = []
        apply_of = _APPLY
        last: Scope | None = None  # most ops name the scope of the op before them: no lookup then
        fields: Fields = {}
        for op in ops:
            scope = op.scope
            if scope is not last:
                found = scopes.get(scope)
                if found is None:
                    found = scopes[scope] = self._fields(scope, ids.of(scope), now)
                fields, last = found, scope
            apply = apply_of.get(op.__class__)
            if apply is None:
                raise TypeError(f"unknown state op {op!r}")
            results.append(apply(fields, op))
        self._evict(now)
        return results

    async def read_scope(self, scope: Scope, scope_id: str) -> dict[str, OpResult]:
        name = f"{scope.value}:{scope_id}"
        fields = self._slots.get(name)
        if fields is None or self._deadlines[name] <= self._clock():
            return {}
        return dict(fields)

    async def clear_scope(self, scope: Scope, scope_id: str) -> bool:
        name = f"{scope.value}:{scope_id}"
        self._deadlines.pop(name, None)
        return self._slots.pop(name, None) is not None

    async def ids_ending(self, scope: Scope, suffix: str) -> list[str]:
        head, now = f"{scope.value}:", self._clock()
        return [
            name[len(head) :]
            for name in self._slots
            if name.startswith(head) and name.endswith(suffix) and self._deadlines[name] > now
        ]

    async def remember(self, name: str, value: str, ttl: float) -> None:
        self._keep(name, value, ttl)

    async def claim(self, name: str, ttl: float, value: str = "1") -> bool:
        entry = self._plain.get(name)
        if entry is not None and entry[0] > self._clock():
            return False
        self._keep(name, value, ttl)  # no await in between: atomic under asyncio
        return True

    def _keep(self, name: str, value: str, ttl: float) -> None:
        now = self._clock()
        self._plain[name] = (now + ttl, value)
        self._plain.move_to_end(name)
        while self._plain and (next(iter(self._plain.values()))[0] <= now or len(self._plain) > self._max):
            self._plain.popitem(last=False)

    async def recall(self, name: str) -> str | None:
        entry = self._plain.get(name)
        if entry is None or entry[0] <= self._clock():
            return None
        return entry[1]

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._slots.clear()
        self._deadlines.clear()
        self._plain.clear()
