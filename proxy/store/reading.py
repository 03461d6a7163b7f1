"""One read-only connection to the record store, shared by its readers (`runs`, `trips`, `spend`, `recorded`).

Results are plain dicts of JSON-ready values (times as epoch seconds), so the
readers' callers print or serve them without knowing SQLAlchemy. Queries given
together are read in one snapshot; on SQLite, in one thread hop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Executable
from sqlalchemy.ext.asyncio import AsyncEngine

from runguard.proxy.store.database import make_engine, parse, sqlite_reader_engine

Row = dict[str, Any]
PER_PAGE = 50


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing, numbered from 1. Each read asks for one row more than a page to know whether
    another page follows, instead of counting every row."""

    rows: list[Row]
    page: int
    more: bool  # another page follows


class StoreMissing(LookupError):
    """The URL names a SQLite file that does not exist (the reader never creates one)."""


class Reading:
    """Read-only queries on one engine (the writer's, inside the proxy; the CLI's own otherwise)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        idle_seconds: float = 3600.0,
        clock: Callable[[], float] = time.time,
        owns_engine: bool = False,
    ) -> None:
        self._engine = engine
        self._owns_engine = owns_engine
        self.idle_seconds = idle_seconds
        """A run whose last request left tool calls open shows as `running` until this long, then `idle`."""
        self._clock = clock
        path = parse(engine.url.render_as_string(hide_password=False)).sqlite_path
        self._plain = sqlite_reader_engine(path) if path is not None else None  # queries in one thread hop

    @classmethod
    def open(cls, database_url: str, *, idle_seconds: float = 3600.0) -> Reading:
        """A connection with its own engine (close it with `close()`); raises StoreMissing, ValueError."""
        target = parse(database_url)
        path = target.sqlite_path
        if path is not None and not path.exists():
            raise StoreMissing(f"no record store at {path} (the proxy creates it on its first start)")
        return cls(make_engine(target, create_dir=False), idle_seconds=idle_seconds, owns_engine=True)

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def close(self) -> None:
        """Close the connections (and the engine, when `open` made it)."""
        if self._plain is not None:
            self._plain.dispose()
        if self._owns_engine:
            await self._engine.dispose()

    def now(self) -> float:
        return self._clock()

    async def read(self, *queries: Executable) -> list[list[Row]]:
        """Each query's rows as dicts, all read in one transaction (one snapshot)."""
        if self._plain is not None:
            return await asyncio.to_thread(self._plain_all, self._plain, queries)
        async with self._engine.connect() as conn:
            if len(queries) > 1:
                await conn.execution_options(isolation_level="REPEATABLE READ")
            return [[dict(row._mapping) for row in await conn.execute(query)] for query in queries]

    async def count(self, query: Executable) -> int:
        """The one number a `select(func.count())` query reads."""
        (rows,) = await self.read(query)
        return int(next(iter(rows[0].values())))

    async def stream(self, query: Executable, per: int = 100) -> AsyncIterator[Row]:
        """The query's rows as dicts, fetched `per` at a time (for rows that can be large)."""
        async with self._engine.connect() as conn:
            result = await conn.stream(query.execution_options(yield_per=per))
            async for row in result:
                yield dict(row._mapping)

    @staticmethod
    def _plain_all(engine: Engine, queries: Sequence[Executable]) -> list[list[Row]]:
        with engine.connect() as conn:
            return [[dict(row._mapping) for row in conn.execute(query)] for query in queries]
