"""The tables the store keeps: every row the writers build fits its table column for column (writers bind
by position), and the indexes the reader's queries rely on are declared."""

from __future__ import annotations

import itertools

from sqlalchemy import Table

from runguard.proxy.store.batch import RunDelta, build
from runguard.proxy.store.models import Base, Body, Request, Run, RunAgent, Trip
from tests.proxy.store import factory


def _table(model: type[Base]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)
    return table


def _columns(model: type[Base]) -> set[str]:
    return {column.name for column in _table(model).columns}


def _indexes(model: type[Base]) -> set[tuple[str, ...]]:
    return {tuple(column.name for column in index.columns) for index in _table(model).indexes}


def test_the_store_has_exactly_its_six_tables() -> None:
    assert set(Base.metadata.tables) == {"runs", "run_agents", "requests", "trips", "bodies", "resets"}


def test_every_row_the_writers_build_fits_its_table() -> None:
    ids = (f"id-{n}" for n in itertools.count())
    batch = build([factory.request(body=factory.body()), factory.trip()], ids, record_bodies=True)
    assert set(batch.requests[0][0]) == _columns(Request)
    assert set(batch.trips[0][0]) == _columns(Trip)
    assert set(batch.bodies[0]) == _columns(Body)
    assert set(RunDelta("r", "k", 0.0, 0.0).row()) == _columns(Run)
    assert _columns(RunAgent) == {"run_id", "agent", "first_seen"}


def test_keys_are_the_ids_the_writes_stay_idempotent_on() -> None:
    keys = {
        name: tuple(c.name for c in _table(model).primary_key)
        for name, model in (
            ("runs", Run),
            ("run_agents", RunAgent),
            ("requests", Request),
            ("trips", Trip),
            ("bodies", Body),
        )
    }
    assert keys == {
        "runs": ("run_id",),
        "run_agents": ("run_id", "agent"),
        "requests": ("id",),
        "trips": ("id",),
        "bodies": ("request_id",),
    }


def test_the_indexes_the_reader_s_queries_use_are_declared() -> None:
    assert {("last_seen",), ("key_hash", "last_seen"), ("exit_reason", "last_seen")} <= _indexes(Run)
    assert {("run_id", "request_index"), ("at", "key_hash", "model", "usd")} <= _indexes(Request)
    assert {("run_id", "at"), ("detector",), ("detector", "run_id"), ("at",)} <= _indexes(Trip)
    assert ("run_id",) in _indexes(Body)


def test_run_outcomes_may_be_unknown_but_totals_never_are() -> None:
    nullable = {column.name for column in _table(Run).columns if column.nullable}
    assert nullable == {"exit_reason", "exit_at"}
