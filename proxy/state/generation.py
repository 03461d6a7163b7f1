"""Telling that the state lost writes: a generation mark, a heartbeat, and the server's identity.

A shared state (Redis) can lose what it held while the proxy goes on: a restart without
persistence empties it, a failover promotes a replica that had not received the last writes, a
managed endpoint starts pointing at another server. The proxy must then rebuild the state from the
records (`guard.records.rebuild`). `Generation.look` tells, in one batch every few seconds:

- the mark (`generation.mark` in a scope of its own) is missing: the state is new or was emptied;
- the heartbeat (`generation.beat`, added to by every process at each look) went back below what this
  process saw last: the server is another one, or restored from an older copy;
- the server's identity (`ServerIdentity.server_id`, Redis' run id) changed: another server answers
  (a failover, or a restart; a state kept on disk is then merged with the records, never lowered).

One process rebuilds: the first to swap the mark it saw for `rebuilding <time>` (compare-and-set).
The others see `BUSY` until it writes the new mark, which they adopt. A rebuild that died half-way
(its mark older than `stale_after`) is taken over.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Protocol, runtime_checkable

from runguard.proxy.core.ops import Add, CompareAndSet, Get, Put, Scope
from runguard.proxy.state.base import ScopeIds, StateBackend

MARK_ID = "~generation"  # a key-scope id no key takes (key hashes are k_<hex>)
MARK, BEAT = "generation.mark", "generation.beat"
_IDS = ScopeIds(run=MARK_ID, key=MARK_ID, key_model=MARK_ID, key_day=MARK_ID, thread=MARK_ID)
REBUILDING = "rebuilding"


@runtime_checkable
class ServerIdentity(Protocol):
    async def server_id(self) -> str:
        """What names the server answering now; it changes when another one answers."""
        ...


class Look(StrEnum):
    INTACT = "intact"  # nothing was lost since the last look
    LOST = "lost"  # the state lost writes: rebuild it (`take` first)
    BUSY = "busy"  # another process is rebuilding it


class Generation:
    """What this process saw of the state's generation (see the module docstring)."""

    def __init__(self, state: StateBackend, clock: Callable[[], float] = time.time, stale_after: float = 120.0) -> None:
        self._state = state
        self._clock = clock
        self._stale_after = stale_after
        self._mark: str | None = None  # the mark this process saw last
        self._beat = 0.0
        self._server: str | None = None
        self.seen: str | None = None  # the mark of the last look (`take` swaps it)

    async def look(self) -> Look:
        """One look (raises `StateUnavailable` when the state does not answer)."""
        server = await self._state.server_id() if isinstance(self._state, ServerIdentity) else None
        beat, mark = await self._state.execute(_IDS, [Add(Scope.KEY, BEAT, 1), Get(Scope.KEY, MARK)])
        beat = beat if isinstance(beat, float) else 0.0
        mark = mark if isinstance(mark, str) else None
        self.seen = mark
        moved = server is not None and self._server is not None and server != self._server
        went_back = beat <= self._beat
        self._server, self._beat = server, beat
        if mark is not None and mark.startswith(REBUILDING):
            if self._clock() - _since(mark) < self._stale_after:
                return Look.BUSY
            return Look.LOST
        if mark is None:
            return Look.LOST
        if mark != self._mark:  # rebuilt by another process (or this one's first look): the new generation
            self._mark = mark
            return Look.LOST if moved else Look.INTACT
        return Look.LOST if moved or went_back else Look.INTACT

    async def take(self) -> str | None:
        """Claim the rebuild of the generation the last look saw: a token if this process won it."""
        token = f"{REBUILDING} {self._clock()!r} {secrets.token_hex(6)}"
        won = await self._state.execute(_IDS, [CompareAndSet(Scope.KEY, MARK, self.seen, token)])
        return token if won[0] == token else None

    async def done(self) -> None:
        """The rebuild is done: a new generation, adopted by every process at its next look."""
        mark = f"built {self._clock()!r} {secrets.token_hex(6)}"
        await self._state.execute(_IDS, [Put(Scope.KEY, MARK, mark)])
        self._mark = self.seen = mark


def _since(mark: str) -> float:
    try:
        return float(mark.split()[1])
    except (IndexError, ValueError):
        return 0.0
