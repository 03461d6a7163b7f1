"""Bringing the store's schema to the newest revision, programmatically, at start.

On PostgreSQL the upgrade runs inside one transaction that first takes a
transaction-level advisory lock: replicas starting together queue on the
lock, the first migrates, the others find the schema at head and do nothing.
The lock is released by the commit, even if the process dies mid-way. On
SQLite, DDL is transactional too; a second process that lost the race for
the write lock retries (see `upgrade`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
import zlib
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from runguard.proxy.store.database import Target, make_engine

log = logging.getLogger("runguard.store")

HERE = Path(__file__).parent
SQLITE_ATTEMPTS = 5

# Alembic keeps its migration context in module globals (`alembic.context`, `alembic.op`), so two
# upgrades interleaved in one process (several apps, or tests) would clobber each other. Upgrades in
# one process therefore take turns: one lock per event loop, forgotten with the loop.
_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _turn() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _TURNS.get(loop)
    if lock is None:
        lock = _TURNS[loop] = asyncio.Lock()
    return lock


def alembic_config(connection: Connection | None = None) -> Config:
    """The packaged alembic.ini with the migrations directory of this installation."""
    config = Config(str(HERE / "alembic.ini"))
    config.set_main_option("script_location", str(HERE / "migrations"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def lock_key(schema: str | None) -> int:
    """A signed 64-bit advisory-lock key, one per schema (tests in parallel schemas do not queue)."""
    return zlib.crc32(f"runguard-store:{schema or ''}".encode()) | (0x5247 << 32)


def _upgrade(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "head")


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(_current)


async def upgrade(engine: AsyncEngine, target: Target) -> None:
    """Migrate to head; safe to call from several processes (and apps) at once, and again and again."""
    async with _turn():
        await _upgrade_now(engine, target)


async def _upgrade_now(engine: AsyncEngine, target: Target) -> None:
    if target.postgres:
        async with engine.begin() as conn:
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(target.schema)})
            if target.schema:
                await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{target.schema}"'))
            await conn.run_sync(_upgrade)
        return
    # SQLite: a connection of its own whose transaction holds the write lock from the start (see
    # make_engine); a second process waits on the busy timeout, then finds the schema at head.
    exclusive = make_engine(target, exclusive=True)
    try:
        for attempt in range(1, SQLITE_ATTEMPTS + 1):
            try:
                async with exclusive.begin() as conn:
                    await conn.run_sync(_upgrade)
                return
            except OperationalError as exc:  # the lock was held longer than the busy timeout
                if attempt == SQLITE_ATTEMPTS or not any(word in str(exc).lower() for word in ("locked", "busy")):
                    raise
                log.info("store migration: database busy, retrying (%s)", exc.orig)
                await asyncio.sleep(0.2 * attempt)
    finally:
        await exclusive.dispose()
