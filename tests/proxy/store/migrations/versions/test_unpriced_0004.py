"""Unpriced requests on SQLite and PostgreSQL: a store of the revision before migrates, its requests that used
tokens at a cost of 0.0 become unpriced (NULL cost, counted by their run), the others keep their cost; the
downgrade gives the 0.0 back."""

from __future__ import annotations

from alembic import command
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from runguard.proxy.store import make_engine, parse
from runguard.proxy.store.migrate import alembic_config

REQUEST = (
    "INSERT INTO requests (id, run_id, request_index, at, key_hash, agent, model, provider, api, streamed, status,"
    " input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_estimated, usd, overhead_ms,"
    " tool_calls, verdicts) VALUES (:id, :run, :index, 1.0, 'kh', '', :model, 'openai', 'chat', false, 200,"
    " :tokens, :tokens, 0, 0, false, :usd, 0.1, '[]', '[]')"
)
RUN = (
    "INSERT INTO runs (run_id, key_hash, first_seen, last_seen, agents, requests, input_tokens, output_tokens,"
    " cached_tokens, usd, trips, warnings, usd_avoided) VALUES (:run, 'kh', 1.0, 1.0, 0, :n, 0, 0, 0, :usd, 0, 0, 0)"
)


async def _to(engine: AsyncEngine, schema: str | None, revision: str, *, down: bool = False) -> None:
    def move(connection: Connection) -> None:
        (command.downgrade if down else command.upgrade)(alembic_config(connection), revision)

    async with engine.begin() as conn:
        if schema:  # the test's own PostgreSQL schema, as the store's start makes it
            await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        await conn.run_sync(move)


async def test_old_zero_costs_of_used_tokens_become_unpriced(store_url: str) -> None:
    target = parse(store_url)
    engine = make_engine(target)
    try:
        await _to(engine, target.schema, "restarts_0003")
        async with engine.begin() as conn:
            for row in (
                {"id": "r1", "run": "mixed", "index": 1, "model": "gpt-4o", "tokens": 100, "usd": 0.01},
                {"id": "r2", "run": "mixed", "index": 2, "model": "acme-coder-9", "tokens": 100, "usd": 0.0},
                {"id": "r3", "run": "local", "index": 1, "model": "gpt-4o", "tokens": 0, "usd": 0.0},  # answered here
            ):
                await conn.execute(text(REQUEST), row)
            await conn.execute(text(RUN), {"run": "mixed", "n": 2, "usd": 0.01})
            await conn.execute(text(RUN), {"run": "local", "n": 1, "usd": 0.0})
        await _to(engine, target.schema, "unpriced_0004")
        async with engine.connect() as conn:
            costs = dict((await conn.execute(text("SELECT id, usd FROM requests ORDER BY id"))).all())
            counts = dict((await conn.execute(text("SELECT run_id, unpriced FROM runs"))).all())
        assert costs == {"r1": 0.01, "r2": None, "r3": 0.0}
        assert counts == {"mixed": 1, "local": 0}
        await _to(engine, target.schema, "restarts_0003", down=True)
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT usd FROM requests WHERE id = 'r2'"))).scalar_one() == 0.0
    finally:
        await engine.dispose()
