"""The durable record store: SQLite by default, PostgreSQL for replicas (SQLAlchemy 2 async).

This package is the only place SQLAlchemy is used. The proxy writes through
`QueueSink` (a `RecordSink` that batches off the hot path) and reads through
`StoreReader` (admin API and CLI).
"""

from __future__ import annotations

from runguard.proxy.store.database import Target, make_engine, parse
from runguard.proxy.store.migrate import current_revision, head_revision, upgrade
from runguard.proxy.store.reader import StoreMissing, StoreReader
from runguard.proxy.store.writer import QueueSink

__all__ = [
    "QueueSink",
    "StoreMissing",
    "StoreReader",
    "Target",
    "current_revision",
    "head_revision",
    "make_engine",
    "parse",
    "upgrade",
]
