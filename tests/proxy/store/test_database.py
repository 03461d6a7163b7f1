"""Store URLs and engines: a URL is checked and split (a PostgreSQL schema taken out of it), SQLite gets
WAL, a busy timeout and its directory made, PostgreSQL the schema as its search_path, and JSON columns
go through orjson both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from runguard.proxy.store import make_engine, parse, upgrade
from runguard.proxy.store.database import sqlite_reader_engine


def test_a_url_splits_into_what_to_connect_to_and_the_schema() -> None:
    pg = parse("postgresql+asyncpg://rg:s3cret@db:5432/records?schema=team_a&ssl=require")
    assert (pg.postgres, pg.sqlite, pg.schema, pg.sqlite_path) == (True, False, "team_a", None)
    assert "schema" not in pg.url.query and pg.url.query["ssl"] == "require"
    assert "s3cret" not in pg.describe() and "db:5432/records" in pg.describe()
    assert parse("postgresql+asyncpg://db/r?schema=a&schema=b").schema == "b"
    lite = parse("sqlite+aiosqlite:///data/runguard.db")
    assert (lite.sqlite, lite.schema, lite.sqlite_path) == (True, None, Path("data/runguard.db"))
    for memory in (
        "sqlite+aiosqlite://",
        "sqlite+aiosqlite:///:memory:",
        "sqlite+aiosqlite:///file:x?mode=memory&uri=true",
    ):
        assert parse(memory).sqlite_path is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("mysql+aiomysql://x/y", "unsupported database"),
        ("sqlite+aiosqlite:///x.db?schema=s", "PostgreSQL only"),
        ("postgresql+asyncpg://u@h/db?schema=a;drop", "plain identifier"),
        ("not a url", "not a database URL"),
    ],
)
def test_bad_urls_are_refused_with_the_reason(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse(url)


async def test_sqlite_parent_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "runguard.db"
    target = parse(f"sqlite+aiosqlite:///{path}")
    engine = make_engine(target)
    try:
        await upgrade(engine, target)
        async with engine.connect() as conn:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar_one()
            busy = (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar_one()
    finally:
        await engine.dispose()
    assert path.exists() and mode == "wal" and busy >= 1000


async def test_a_missing_directory_is_left_alone_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "runguard.db"
    engine = make_engine(parse(f"sqlite+aiosqlite:///{path}"), create_dir=False)
    await engine.dispose()
    assert not path.parent.exists()


async def test_json_columns_round_trip_and_the_reader_engine_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "runguard.db"
    target = parse(f"sqlite+aiosqlite:///{path}")
    engine = make_engine(target)
    try:
        await upgrade(engine, target)
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO trips (id, run_id, key_hash, detector, action, reason, scope, request_index, at,"
                    " usd_so_far, tokens_so_far, usd_avoided, evidence)"
                    " VALUES ('t1', 'r', 'k', 'spiral', 'block', 'why', 'run', 1, 1.0, 0, 0, 0, :evidence)"
                ),
                {"evidence": '{"calls": [{"tool": "search"}], "value": 0.91}'},
            )
    finally:
        await engine.dispose()
    reader = sqlite_reader_engine(path)
    try:
        from sqlalchemy import select

        from runguard.proxy.store.models import Trip

        with reader.connect() as conn:
            evidence = conn.execute(select(Trip.evidence)).scalar_one()
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()
    finally:
        reader.dispose()
    assert evidence == {"calls": [{"tool": "search"}], "value": 0.91}
    assert mode == "wal"


@pytest.mark.postgres
async def test_a_postgres_schema_is_the_connection_s_search_path(pg_url: str) -> None:
    target = parse(pg_url)
    engine = make_engine(target)
    try:
        await upgrade(engine, target)
        async with engine.connect() as conn:
            path = (await conn.execute(text("SHOW search_path"))).scalar_one()
            name = (await conn.execute(text("SELECT current_setting('application_name')"))).scalar_one()
            tables = (
                await conn.execute(
                    text("SELECT count(*) FROM information_schema.tables WHERE table_schema = :s"),
                    {"s": target.schema},
                )
            ).scalar_one()
    finally:
        await engine.dispose()
    assert target.schema in path and name == "runguard-proxy"
    assert tables >= 5  # runs, run_agents, requests, trips, bodies (and alembic_version) in the test's schema
