"""The resets log: every manual reset of a run or a key, kept in the record store.

A reset through the admin API (which the CLI's `reset` and the dashboard call) clears the state at
once, and is written here before the answer goes out: a later rebuild of the state from the records
(`live`) skips every trip before it, so a released run stays released across a restart.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from runguard.proxy.store.batch import stored_run_id
from runguard.proxy.store.models import Reset

SCOPES = frozenset({"run", "key", "key_model"})


class ResetLog:
    """Writes resets into the store's `resets` table."""

    def __init__(self, engine: AsyncEngine, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self._clock = clock

    async def record(self, scope: str, target: str, tenant: str | None = None) -> float:
        """Keep one reset (`scope`: run, key or key_model; `target`: the run id, the key hash, or key hash|model);
        returns its time."""
        if scope not in SCOPES:
            raise ValueError(f"unknown reset scope {scope!r}")
        at = self._clock()
        target = stored_run_id(target) if scope == "run" else target
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(Reset).values(id=secrets.token_hex(12), scope=scope, target=target, tenant=tenant, at=at)
            )
        return at
