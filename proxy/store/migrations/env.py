"""Alembic environment of the record store: always given a live connection by `migrate.py`.

The proxy migrates programmatically at start (inside the advisory lock on
PostgreSQL), so this file never builds an engine of its own and never reads a
URL from alembic.ini.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from runguard.proxy.store.models import Base


def run_with(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    raise RuntimeError("the record store migrates through runguard.proxy.store.migrate, with a connection")
run_with(_connection)
