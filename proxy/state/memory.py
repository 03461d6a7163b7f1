"""In-process state: the default backend, one process, nothing to set up.

Scopes live in a dict with a deadline each, in least-recently-used order; a
batch never awaits, so it is atomic under asyncio. Expired scopes are dropped
as the oldest end of the order is passed, and the number of scopes is capped
so memory stays bounded however many runs come and go: past the cap, and at a
tenant's cap on its runs, what is dropped is never a held scope (a stop, a
key's spend: see `bounds`), which waits out its idle time instead.

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

from runguard.proxy.core.errors import StateFull
from runguard.proxy.core.ops import Add, CompareAndSet, Get, Op, OpResult, Push, Put, PutNX, Raise, Scope
from runguard.proxy.state.base import ScopeIds, ScopeTtls
from runguard.proxy.state.bounds import HeldFields, Pressure, owner

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
    """`StateBackend` in this process's memory.

    `held`: the fields that keep a scope from being dropped for room (`bounds`);
    `max_runs_per_tenant`: the most runs one tenant keeps (0: no bound but the global one).
    """

    never_waits = True  # a subclass that awaits (a test's slow state) must say so

    def __init__(
        self,
        ttls: ScopeTtls | None = None,
        max_scopes: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        *,
        held: HeldFields | None = None,
        max_runs_per_tenant: int = 0,
    ) -> None:
        ttls = ttls or ScopeTtls()
        self._ttl = {scope: ttls.of(scope) for scope in Scope}  # read for every scope of every batch
        self._max = max_scopes
        self._clock = clock
        self._slots: dict[str, Fields] = {}
        self._deadlines: dict[str, float] = {}
        self._free: OrderedDict[str, None] = OrderedDict()  # every scope not known to be held: LRU first
        self._kept: OrderedDict[str, None] = OrderedDict()  # scopes found held when room was made
        self._held = {f"{scope}": fields for scope, fields in (held or {}).items()}  # by the name's prefix
        self._per_tenant = max_runs_per_tenant
        self._runs_of: dict[str, OrderedDict[str, None]] = {}  # tenant -> its run scopes, LRU first
        self.pressure = Pressure()
        self._plain: OrderedDict[str, tuple[float, str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def kept(self) -> int:
        """Held scopes found when room was made (kept past the bound until their idle time)."""
        return len(self._kept)

    def _holds(self, name: str) -> bool:
        wanted = self._held.get(name.partition(":")[0])
        if not wanted:
            return False
        fields = self._slots[name]
        return any(fields.get(field) for field in wanted)

    def _drop(self, name: str) -> None:
        del self._slots[name], self._deadlines[name]
        if name in self._free:
            del self._free[name]
        else:
            del self._kept[name]
        if self._per_tenant and name.startswith("run:"):
            tenant = owner(name[4:])
            runs = self._runs_of.get(tenant)
            if runs is not None:
                runs.pop(name, None)
                if not runs:
                    del self._runs_of[tenant]

    def _evict(self, now: float) -> None:
        free, kept, deadlines = self._free, self._kept, self._deadlines
        while kept and deadlines[name := next(iter(kept))] <= now:
            self._drop(name)
        while free:
            name = next(iter(free))
            if deadlines[name] > now and len(self._slots) <= self._max:
                break
            if deadlines[name] <= now:
                self._drop(name)
            elif self._holds(name):
                del free[name]  # a stop or a spend: kept until its idle time, out of the LRU's way
                kept[name] = None
            else:
                self._drop(name)
                self.pressure.evicted += 1

    def _touch(self, name: str) -> None:
        try:
            self._free.move_to_end(name)
        except KeyError:  # found held once: back in the LRU order, judged again when it reaches its end
            del self._kept[name]
            self._free[name] = None

    def _room_for_run(self, scope_id: str, now: float) -> OrderedDict[str, None]:
        """The run scopes of `scope_id`'s tenant, with room for one more: its own least recently used run
        that is not held dropped if need be. Raises StateFull when every one of them is held."""
        tenant = owner(scope_id)
        runs = self._runs_of.get(tenant) or OrderedDict()
        looked = 0
        while len(runs) >= self._per_tenant and looked < len(runs):
            name = next(iter(runs))
            if self._deadlines[name] <= now:
                self._drop(name)
            elif self._holds(name):
                runs.move_to_end(name)
                looked += 1
            else:
                self._drop(name)
                self.pressure.evicted_in_tenant += 1
        if len(runs) >= self._per_tenant:
            self.pressure.refused += 1
            raise StateFull(
                f"this tenant's {len(runs)} runs in memory (runs.max_runs_per_tenant) are all stopped or "
                "carrying spend; reset some, or wait until they are idle past runs.idle_seconds"
            )
        self._runs_of[tenant] = runs  # (again: dropping its last run took the tenant out)
        return runs

    def _fields(self, scope: Scope, scope_id: str, now: float) -> Fields:
        name = f"{scope}:{scope_id}"  # a Scope formats as its value (StrEnum)
        fields = self._slots.get(name)
        if fields is None:
            if self._per_tenant and scope is Scope.RUN:
                self._room_for_run(scope_id, now)[name] = None
            fields = self._slots[name] = {}
            self._free[name] = None
        else:
            if self._deadlines[name] <= now:
                fields = self._slots[name] = {}
            self._touch(name)
            if self._per_tenant and scope is Scope.RUN:
                self._runs_of[owner(scope_id)].move_to_end(name)
        self._deadlines[name] = now + self._ttl[scope]
        return fields

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        now = self._clock()
        scopes: dict[Scope, Fields] = {}  # each scope looked up once per batch, not once per op
        results: list[OpResult] = [None] * len(ops)
        apply_of = _APPLY
        last: Scope | None = None  # most ops name the scope of the op before them: no lookup then
        fields: Fields = {}
        # Every request's batches are mostly `Get` and `Add` (the guard's counters): those two are applied
        # here, as `_get` and `_add` do, with no call of their own; the others by their function. Results
        # are written in place, not appended: a Python call less per op.
        for index, op in enumerate(ops):
            scope = op.scope
            if scope is not last:
                if scope in scopes:
                    fields = scopes[scope]
                else:
                    fields = scopes[scope] = self._fields(scope, ids.of(scope), now)
                last = scope
            kind = op.__class__
            if kind is Get:
                results[index] = fields.get(op.field)
            elif kind is Add:
                field = op.field
                current = fields.get(field)
                value = (current if current.__class__ is float else 0.0) + op.amount  # type: ignore[union-attr]
                fields[field] = results[index] = value
            else:
                try:
                    apply = apply_of[kind]
                except KeyError:
                    raise TypeError(f"unknown state op {op!r}") from None
                results[index] = apply(fields, op)
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
        if name not in self._slots:
            return False
        self._drop(name)
        return True

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
        self._free.clear()
        self._kept.clear()
        self._runs_of.clear()
        self._plain.clear()
