"""The resets log keeps each reset in the store."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from runguard.proxy.store import make_engine, parse, upgrade
from runguard.proxy.store.batch import stored_run_id
from runguard.proxy.store.models import Reset
from runguard.proxy.store.resets import ResetLog


async def test_a_reset_is_kept_with_its_time_and_target(store_url: str) -> None:
    target = parse(store_url)
    engine = make_engine(target)
    try:
        await upgrade(engine, target)
        log = ResetLog(engine, clock=lambda: 1234.5)
        assert await log.record("run", "run-7", "team-a") == 1234.5
        long_id = "r" * 5000  # kept as the store keeps any run id, so the rebuild finds its run
        await log.record("run", long_id)
        await log.record("key_model", "k_a|gpt-4o")
        with pytest.raises(ValueError, match="unknown reset scope"):
            await log.record("everything", "k_a")
        async with engine.connect() as conn:
            rows = (await conn.execute(select(Reset.scope, Reset.target, Reset.tenant, Reset.at))).all()
    finally:
        await engine.dispose()
    assert sorted(tuple(row) for row in rows) == sorted(
        [
            ("run", "run-7", "team-a", 1234.5),
            ("run", stored_run_id(long_id), None, 1234.5),
            ("key_model", "k_a|gpt-4o", None, 1234.5),
        ]
    )
