"""Migrations: created on first start, idempotent, identical to the models, safe when replicas start together."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection

from runguard.proxy.store import current_revision, head_revision, make_engine, parse, upgrade
from runguard.proxy.store.models import Base
from tests.proxy.store.conftest import count


def _differences(connection: Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(connection), Base.metadata))


async def test_upgrade_creates_the_schema_and_is_idempotent(store_url: str) -> None:
    target = parse(store_url)
    engine = make_engine(target)
    try:
        assert await current_revision(engine) is None
        for _ in range(3):
            await upgrade(engine, target)
        assert await current_revision(engine) == head_revision() is not None
        async with engine.connect() as conn:
            assert await conn.run_sync(_differences) == []  # the migration builds exactly the models
    finally:
        await engine.dispose()
    assert await count(store_url, "alembic_version") == 1


async def test_concurrent_starts_migrate_once(store_url: str) -> None:
    """Replicas starting together: every one migrates without error, the schema is built once."""
    target = parse(store_url)
    engines = [make_engine(target) for _ in range(4)]
    try:
        await asyncio.gather(*(upgrade(engine, target) for engine in engines))
        assert {await current_revision(engine) for engine in engines} == {head_revision()}
    finally:
        for engine in engines:
            await engine.dispose()
    assert await count(store_url, "alembic_version") == 1


MIGRATE = """
import asyncio, sys
from runguard.proxy.store import make_engine, parse, upgrade, current_revision

async def main(url):
    target = parse(url)
    engine = make_engine(target)
    await upgrade(engine, target)
    print(await current_revision(engine))
    await engine.dispose()

asyncio.run(main(sys.argv[1]))
"""


async def test_processes_starting_together_migrate_once(store_url: str) -> None:
    """Four processes (replicas) migrate the same database at the same moment: all succeed, once."""
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", MIGRATE, store_url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(4)
    ]
    results = [await process.communicate() for process in processes]
    for process, (out, err) in zip(processes, results, strict=True):
        assert process.returncode == 0, err.decode()
        assert out.decode().strip() == head_revision()
    assert await count(store_url, "alembic_version") == 1
