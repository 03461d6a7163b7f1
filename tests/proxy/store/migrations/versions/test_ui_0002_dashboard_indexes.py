"""The dashboard's indexes: added on top of the first schema, used by the paged queries (a range read,
not a scan), and removed again by the downgrade, tables untouched."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, inspect

from tests.proxy.store.migrations.versions.support import database, downgrade, upgrade

ADDED = {
    ("runs", "ix_runs_key_last_seen"),
    ("runs", "ix_runs_exit_last_seen"),
    ("trips", "ix_trips_detector_run"),
    ("requests", "ix_requests_at_spend"),
}


def _indexes(engine: Engine) -> set[tuple[str, str]]:
    with engine.connect() as connection:
        found = inspect(connection)
        return {
            (table, index["name"] or "")
            for table in ("runs", "trips", "requests")
            for index in found.get_indexes(table)
        }


def _plan(engine: Engine, query: str) -> str:
    with engine.connect() as connection:
        return " ".join(str(row[-1]) for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {query}"))


def test_the_indexes_come_with_the_revision_and_go_with_its_downgrade(tmp_path: Path) -> None:
    with database(tmp_path) as engine:
        upgrade(engine, "0001")
        assert not ADDED & _indexes(engine)
        upgrade(engine, "ui_0002")
        assert _indexes(engine) >= ADDED
        downgrade(engine, "0001")
        assert not ADDED & _indexes(engine)
        assert {"ix_requests_run", "ix_trips_run"} <= {name for _, name in _indexes(engine)}  # 0001's stay


def test_the_paged_queries_read_a_range_of_an_index(tmp_path: Path) -> None:
    with database(tmp_path) as engine:
        upgrade(engine, "ui_0002")
        by_key = _plan(engine, "SELECT run_id FROM runs WHERE key_hash = 'k' ORDER BY last_seen DESC LIMIT 50")
        by_outcome = _plan(engine, "SELECT run_id FROM runs WHERE exit_reason = 'completed' ORDER BY last_seen DESC")
        by_detector = _plan(engine, "SELECT DISTINCT run_id FROM trips WHERE detector = 'spiral'")
        spend = _plan(engine, "SELECT key_hash, model, sum(usd) FROM requests WHERE at >= 0 GROUP BY key_hash, model")
    assert "ix_runs_key_last_seen" in by_key and "TEMP B-TREE" not in by_key  # read in order: no sort
    assert "ix_runs_exit_last_seen" in by_outcome and "TEMP B-TREE" not in by_outcome
    assert "COVERING INDEX ix_trips_detector_run" in by_detector
    assert "COVERING INDEX ix_requests_at_spend" in spend
