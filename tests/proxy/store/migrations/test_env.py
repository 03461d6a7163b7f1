"""The alembic environment runs only on the connection `store.migrate` gives it: never an engine or a URL
of its own (the proxy migrates at start, inside its lock)."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect

from runguard.proxy.store.migrate import alembic_config, head_revision


def test_without_a_connection_it_refuses_to_run(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"migrates through runguard\.proxy\.store\.migrate"):
        command.upgrade(alembic_config(), "head")
    assert list(tmp_path.iterdir()) == []  # nothing was created anywhere it could see


def test_on_a_given_connection_it_migrates_that_database(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/env.db")
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "head")
        with engine.connect() as connection:
            version = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
            tables = set(inspect(connection).get_table_names())
    finally:
        engine.dispose()
    assert version == head_revision()
    assert {"runs", "run_agents", "requests", "trips", "bodies"} <= tables
