"""Engines for the record store: SQLite (the embedded default) or PostgreSQL, from one URL.

SQLite gets WAL (readers such as `runguard-proxy runs` never block the
writer), a busy timeout (a second process waits for the lock instead of
failing) and its parent directory created, so the default URL works on the
first start with no set-up. PostgreSQL takes an optional `?schema=NAME` in the
URL, applied as the connection's search_path (asyncpg rejects unknown
connect arguments, so it is taken out of the URL here).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

BUSY_TIMEOUT_MS = 10_000
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed store URL: what to connect to, and the PostgreSQL schema if one is named."""

    url: URL
    schema: str | None

    @property
    def sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @property
    def postgres(self) -> bool:
        return self.url.get_backend_name() == "postgresql"

    @property
    def sqlite_path(self) -> Path | None:
        """The database file, or None for an in-memory SQLite database (or PostgreSQL)."""
        database = self.url.database
        if not self.sqlite or not database or database == ":memory:" or database.startswith("file:"):
            return None
        return Path(database)

    def describe(self) -> str:
        """The URL without its password, for messages."""
        return self.url.render_as_string(hide_password=True)


def parse(url: str) -> Target:
    """Validate and split a store URL; raises ValueError naming what is wrong."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise ValueError(f"not a database URL: {url!r}") from exc
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ValueError(f"unsupported database {backend!r}: use sqlite+aiosqlite:// or postgresql+asyncpg://")
    schema = parsed.query.get("schema")
    if isinstance(schema, tuple):
        schema = schema[-1]
    if schema is not None:
        if backend != "postgresql":
            raise ValueError("the schema= URL option is for PostgreSQL only")
        if not schema.isidentifier():
            raise ValueError(f"schema {schema!r} must be a plain identifier")
        parsed = parsed.difference_update_query(["schema"])
    return Target(parsed, schema)


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def sqlite_pragmas(dbapi_connection: Any, _record: Any = None) -> None:
    """WAL, a busy timeout and NORMAL sync on a `sqlite3` connection (an engine's on connect, or the writer's)."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across a process crash
    cursor.close()


def _driver_autocommit(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # sqlite3 stops issuing its own BEGIN (it skips DDL)


def _begin_immediate(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _begin_deferred(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN")  # a read transaction: one snapshot until the connection is returned


def make_engine(target: Target, *, create_dir: bool = True, exclusive: bool = False) -> AsyncEngine:
    """An async engine for `target`; the SQLite parent directory is made when `create_dir`.

    `exclusive` (SQLite, for migrations): every transaction begins with BEGIN
    IMMEDIATE, taking the write lock before its first read, and DDL runs inside
    it. Python's sqlite3 otherwise commits around DDL and begins lazily, so two
    processes migrating at once would both find no tables and both create them.
    """
    # JSON columns (tool names, verdicts, evidence) through orjson: the stdlib encoder cost more
    # per row than the rest of the row's parameters.
    kwargs: dict[str, Any] = {"pool_pre_ping": True, "json_serializer": _json_text, "json_deserializer": orjson.loads}
    if target.sqlite:
        path = target.sqlite_path
        if path is not None and create_dir:
            path.parent.mkdir(parents=True, exist_ok=True)
        # Batches insert a varying number of rows, each count its own (large) statement: sqlite3's
        # default cache of 128 prepared statements per connection grew RSS by ~80 MB in a soak.
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000, "cached_statements": 8}
    else:
        settings = {"application_name": "runguard-proxy"}
        if target.schema:
            settings["search_path"] = target.schema
        kwargs["connect_args"] = {
            "server_settings": settings,
            "timeout": CONNECT_TIMEOUT_S,
            "prepared_statement_cache_size": 16,  # as for SQLite above: one statement per batch size
        }
        kwargs["pool_size"] = 4
    engine = create_async_engine(target.url, **kwargs)
    if target.sqlite:
        event.listen(engine.sync_engine, "connect", sqlite_pragmas)
        if exclusive:
            event.listen(engine.sync_engine, "connect", _driver_autocommit)
            event.listen(engine.sync_engine, "begin", _begin_immediate)
    return engine


def sqlite_reader_engine(path: Path) -> Engine:
    """A plain (sync) engine reading one SQLite file, for queries run whole on a thread of their own.

    Through aiosqlite every step of a query (checkout, execute, each fetch) is a hop to its
    thread and back, and under load each hop waits to win the GIL back from the busy event
    loop: an admin query took 270-600 ms at 32 clients. Run in one hop, a query waits once.
    Its pooled connections move between the threads of asyncio's default executor. The queries
    of one checkout share a transaction, so they read one snapshot (WAL: the writer goes on).
    """
    engine = create_engine(
        f"sqlite:///{path}",
        json_deserializer=orjson.loads,
        connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
    )
    event.listen(engine, "connect", sqlite_pragmas)
    event.listen(engine, "connect", _driver_autocommit)
    event.listen(engine, "begin", _begin_deferred)
    return engine
