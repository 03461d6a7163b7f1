"""The asyncpg writer stores exactly what the SQLAlchemy writer stores on PostgreSQL, batch after batch."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import asyncpg
import pytest

from runguard.proxy.store import batch, make_engine, parse, upgrade
from runguard.proxy.store.postgres_writer import PostgresWriter
from runguard.proxy.store.records import Record
from tests.proxy.store import factory
from tests.proxy.store.conftest import drop_schema, plain_dsn, with_schema
from tests.services import require_postgres, unique_name

pytestmark = pytest.mark.postgres

TABLES = {
    "runs": "run_id",
    "run_agents": "run_id, agent",
    "requests": "id",
    "trips": "id",
    "bodies": "request_id",
}


@pytest.fixture
async def two_schemas() -> AsyncIterator[tuple[str, str]]:
    """Store URLs of two fresh, migrated schemas of this test's own (dropped after it)."""
    base = require_postgres()
    schemas = (unique_name("rg_plain"), unique_name("rg_alchemy"))
    urls = tuple(with_schema(base, schema) for schema in schemas)
    try:
        for url in urls:
            target = parse(url)
            engine = make_engine(target)
            await upgrade(engine, target)
            await engine.dispose()
        yield urls[0], urls[1]
    finally:
        for schema in schemas:
            await drop_schema(base, schema)


async def _dump(url: str) -> dict[str, list[tuple[object, ...]]]:
    schema = parse(url).schema
    conn = await asyncpg.connect(plain_dsn(require_postgres()), server_settings={"search_path": str(schema)})
    try:
        return {
            table: [tuple(row) for row in await conn.fetch(f"SELECT * FROM {table} ORDER BY {order}")]
            for table, order in TABLES.items()
        }
    finally:
        await conn.close()


async def _write_both(urls: tuple[str, str], batches: list[list[Record]]) -> None:
    """Every batch through the asyncpg writer (twice: a retry adds nothing) and the SQLAlchemy writer."""
    engines = [make_engine(parse(url)) for url in urls]
    plain, alchemy = PostgresWriter(engines[0]), batch.EngineWriter(engines[1])
    ids = (f"id-{n}" for n in itertools.count())
    try:
        for records in batches:
            prepared = batch.build(records, ids, record_bodies=True)
            await plain.write(prepared)
            await alchemy.write(prepared)
            await plain.write(prepared)
    finally:
        for engine in engines:
            await engine.dispose()


async def test_both_writers_store_the_same_rows(two_schemas: tuple[str, str]) -> None:
    await _write_both(two_schemas, list(factory.batches()))
    plain_rows, alchemy_rows = await _dump(two_schemas[0]), await _dump(two_schemas[1])
    assert plain_rows == alchemy_rows
    assert [len(plain_rows[table]) for table in TABLES] == [3, 4, 7, 2, 1]


async def test_a_large_batch_goes_in_whole(two_schemas: tuple[str, str]) -> None:
    await _write_both(two_schemas, [factory.large_batch()])
    plain_rows, alchemy_rows = await _dump(two_schemas[0]), await _dump(two_schemas[1])
    assert plain_rows == alchemy_rows
    assert [len(plain_rows[table]) for table in TABLES] == [76, 226, 301, 13, 301]
