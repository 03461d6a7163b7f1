"""The store under test: a SQLite file in tmp_path, or a PostgreSQL schema of the test's own.

`store_url` is parametrized over both engines, so every store test runs on
each; the PostgreSQL schema is created by the store itself (the URL names it)
and only that schema is dropped afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from runguard.proxy.store import QueueSink
from tests.services import require_postgres, unique_name


def plain_dsn(sqlalchemy_url: str) -> str:
    """postgresql+asyncpg://... as asyncpg takes it."""
    return sqlalchemy_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def with_schema(sqlalchemy_url: str, schema: str) -> str:
    return f"{sqlalchemy_url}{'&' if '?' in sqlalchemy_url else '?'}schema={schema}"


async def drop_schema(sqlalchemy_url: str, schema: str) -> None:
    conn = await asyncpg.connect(plain_dsn(sqlalchemy_url))
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """A store URL on PostgreSQL with a fresh schema (dropped after the test)."""
    base = require_postgres()
    schema = unique_name("rg_test")
    yield with_schema(base, schema)
    await drop_schema(base, schema)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/store/runguard.db"
        return
    base = require_postgres()
    schema = unique_name("rg_test")
    yield with_schema(base, schema)
    await drop_schema(base, schema)


SinkFactory = Callable[..., QueueSink]


@pytest.fixture
async def make_sink(store_url: str) -> AsyncIterator[SinkFactory]:
    """make_sink(**options) -> a started QueueSink on `store_url`; all closed after the test."""
    sinks: list[QueueSink] = []

    def make(url: str | None = None, **options: object) -> QueueSink:
        options.setdefault("flush_interval", 0.02)
        sink = QueueSink(url or store_url, **options)  # type: ignore[arg-type]
        sink.start()
        sinks.append(sink)
        return sink

    yield make
    for sink in sinks:
        await sink.close()


async def count(url: str, table: str, where: str = "") -> int:
    """Rows in one of the store's tables."""
    from sqlalchemy import text

    from runguard.proxy.store import make_engine, parse

    engine = make_engine(parse(url))
    try:
        async with engine.connect() as conn:
            return int((await conn.execute(text(f"SELECT count(*) FROM {table} {where}"))).scalar_one())
    finally:
        await engine.dispose()
