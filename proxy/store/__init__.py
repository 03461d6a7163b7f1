"""The durable record store: SQLite by default, PostgreSQL for replicas (SQLAlchemy 2 async).

This package is the only place SQLAlchemy is used. The proxy writes through
`QueueSink` (a `RecordSink` that batches off the hot path) and reads through
`StoreReader`: one connection's readers of runs, trips, spend and recorded
traffic, each caller taking the one it reads.
"""

from __future__ import annotations

from runguard.proxy.store.database import Target, make_engine, parse
from runguard.proxy.store.migrate import current_revision, head_revision, upgrade
from runguard.proxy.store.reader import StoreReader
from runguard.proxy.store.reading import PER_PAGE, Page, Reading, Row, StoreMissing
from runguard.proxy.store.recorded import RecordedReader
from runguard.proxy.store.runs import STATUSES, RunFilter, RunReader
from runguard.proxy.store.spend import DayCache, SpendReader
from runguard.proxy.store.trips import TripReader
from runguard.proxy.store.writer import QueueSink

__all__ = [
    "PER_PAGE",
    "STATUSES",
    "DayCache",
    "Page",
    "QueueSink",
    "Reading",
    "RecordedReader",
    "Row",
    "RunFilter",
    "RunReader",
    "SpendReader",
    "StoreMissing",
    "StoreReader",
    "Target",
    "TripReader",
    "current_revision",
    "head_revision",
    "make_engine",
    "parse",
    "upgrade",
]
