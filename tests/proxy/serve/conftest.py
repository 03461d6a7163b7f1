"""The app's store tests run on the record store the store's own tests use (SQLite and PostgreSQL)."""

from __future__ import annotations

from tests.proxy.store.conftest import store_url

__all__ = ["store_url"]
