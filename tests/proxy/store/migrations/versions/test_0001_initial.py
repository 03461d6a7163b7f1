"""The first revision creates the five tables with their keys, and its downgrade removes them all."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect

from tests.proxy.store.migrations.versions.support import database, downgrade, upgrade

TABLES = {"runs", "run_agents", "requests", "trips", "bodies"}


def test_upgrade_creates_the_tables_and_downgrade_removes_them(tmp_path: Path) -> None:
    with database(tmp_path) as engine:
        upgrade(engine, "0001")
        with engine.connect() as connection:
            found = inspect(connection)
            assert set(found.get_table_names()) == TABLES | {"alembic_version"}
            assert found.get_pk_constraint("requests")["constrained_columns"] == ["id"]
            assert found.get_pk_constraint("run_agents")["constrained_columns"] == ["run_id", "agent"]
            columns = {c["name"]: c for c in found.get_columns("runs")}
            assert not columns["usd"]["nullable"] and columns["exit_reason"]["nullable"]
            assert "ix_requests_run" in {index["name"] for index in found.get_indexes("requests")}
        downgrade(engine, "base")
        with engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) == {"alembic_version"}


def test_a_request_row_fits_the_first_schema(tmp_path: Path) -> None:
    with database(tmp_path) as engine:
        upgrade(engine, "0001")
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "INSERT INTO runs (run_id, key_hash, first_seen, last_seen, agents, requests, input_tokens,"
                " output_tokens, cached_tokens, usd, trips, warnings, usd_avoided)"
                " VALUES ('r', 'k', 1, 2, 0, 1, 10, 5, 0, 0.5, 0, 0, 0)"
            )
            assert connection.exec_driver_sql("SELECT usd FROM runs").scalar_one() == 0.5
