"""Running the store's migrations to a chosen revision on a SQLite file (plain, synchronous alembic)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from sqlalchemy import Engine, create_engine

from runguard.proxy.store.migrate import alembic_config


@contextmanager
def database(directory: Path) -> Iterator[Engine]:
    engine = create_engine(f"sqlite:///{directory}/migrated.db")
    try:
        yield engine
    finally:
        engine.dispose()


def upgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), revision)


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)
