"""store: the durable record store, SQLite by default, PostgreSQL for replicas (SQLAlchemy 2 async).

This package is the only place SQLAlchemy is used, and its face imports it only when a name of the store is
used: the proxy writes through `QueueSink` (a `RecordSink` that batches off the hot path) and reads through
`StoreReader`, one connection's readers of runs, trips, spend and recorded traffic, each caller taking the
one it reads. The records themselves (`records`) need no SQLAlchemy.

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.proxy.store.costs import AVOIDED_BASIS
    from runguard.proxy.store.database import Target, make_engine, parse
    from runguard.proxy.store.migrate import current_revision, head_revision, upgrade
    from runguard.proxy.store.reader import StoreReader
    from runguard.proxy.store.reading import PER_PAGE, Page, Reading, Row, StoreMissing
    from runguard.proxy.store.recorded import RecordedReader
    from runguard.proxy.store.runs import STATUSES, RunFilter, RunReader
    from runguard.proxy.store.spend import DayCache, SpendReader
    from runguard.proxy.store.trips import TripReader
    from runguard.proxy.store.writer import QueueSink

HOMES = {
    "AVOIDED_BASIS": "costs",
    "DayCache": "spend",
    "PER_PAGE": "reading",
    "Page": "reading",
    "QueueSink": "writer",
    "Reading": "reading",
    "RecordedReader": "recorded",
    "Row": "reading",
    "RunFilter": "runs",
    "RunReader": "runs",
    "STATUSES": "runs",
    "SpendReader": "spend",
    "StoreMissing": "reading",
    "StoreReader": "reader",
    "Target": "database",
    "TripReader": "trips",
    "current_revision": "migrate",
    "head_revision": "migrate",
    "make_engine": "database",
    "parse": "database",
    "upgrade": "migrate",
}
__all__ = [
    "AVOIDED_BASIS",
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

__getattr__ = lazy_face(__name__, HOMES)
