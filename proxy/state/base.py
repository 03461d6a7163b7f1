"""The one interface between the proxy and run, key and breaker state.

Two backends implement it: `MemoryState` (the default: one process, no set-up)
and `RedisState` (replicas share state). Detectors never see a backend; the
guard binds each op's scope to an id and runs a request's ops as one batch.

Guarantees every backend gives:
- a batch's ops run atomically and in order, whatever scopes they touch
  (Redis: one Lua script call per batch; memory: no await inside a batch);
- every scope expires after its TTL of inactivity; a run's TTL is refreshed
  by each batch that touches it;
- a failure raises `StateUnavailable`; the guard decides to fail open or closed.
  When the batch may have run all the same (its reply was lost), the exception's
  `pending` gives its results once it is known to have run exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.ops import Op, OpResult, Scope

__all__ = ["ScopeIds", "ScopeTtls", "StateBackend", "StateUnavailable"]


@frozen
class ScopeIds:
    """The ids the scopes of one request bind to."""

    run: str
    key: str
    key_model: str
    key_day: str
    thread: str = ""  # a nested conversation's id (see runguard.proxy.runs.nesting); the run's when not nested

    @property
    def run_trace(self) -> str:
        return self.run

    def of(self, scope: Scope) -> str:
        return str(getattr(self, scope))  # a Scope is its value (StrEnum), read without the enum's descriptor


@frozen
class ScopeTtls:
    """Seconds of inactivity after which a scope's state is forgotten."""

    run: float = 3600.0
    thread: float = 3600.0
    key: float = 86400.0
    key_model: float = 86400.0
    key_day: float = 2 * 86400.0
    run_trace: float = 7 * 86400.0

    @classmethod
    def of_runs(cls, idle_seconds: float, remember_seconds: float) -> ScopeTtls:
        """A run's and its threads' state lives `idle_seconds` after its last request, its trace
        `remember_seconds`."""
        return cls(run=idle_seconds, thread=idle_seconds, run_trace=remember_seconds)

    def of(self, scope: Scope) -> float:
        return float(getattr(self, scope))


class StateBackend(Protocol):
    # True when no call ever suspends (it answers without awaiting anything): a caller then cannot be
    # cancelled half-way through one, and needs no shield around work that must not be cut short.
    never_waits: bool

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        """Run `ops` (results in the same order); one round trip at most."""
        ...

    async def read_scope(self, scope: Scope, scope_id: str) -> dict[str, OpResult]:
        """Every field of one scope (for the admin API and `show`)."""
        ...

    async def clear_scope(self, scope: Scope, scope_id: str) -> bool:
        """Forget one scope's state (manual reset); True if there was any."""
        ...

    async def ids_ending(self, scope: Scope, suffix: str) -> list[str]:
        """The ids of `scope`'s instances with state whose id ends with `suffix` (the admin API finds a run's
        tenants so: a scan of the state, never made for a request)."""
        ...

    async def remember(self, name: str, value: str, ttl: float) -> None:
        """A plain key/value with a TTL (e.g. response id -> run id)."""
        ...

    async def recall(self, name: str) -> str | None: ...

    async def claim(self, name: str, ttl: float, value: str = "1") -> bool:
        """Take the plain key `name` for `ttl` seconds, holding `value`: True for the one caller (of all
        replicas) that took it, False while it is taken (e.g. to account for a background response once)."""
        ...

    async def ping(self) -> bool:
        """Whether the backend answers now."""
        ...

    async def close(self) -> None: ...
