"""The CLI's read commands run on the record store the store's own tests use (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from tests.proxy.cli.views import Filled, fill_by_traffic
from tests.proxy.store.conftest import make_sink, store_url
from tests.support.upstream import FakeUpstream

__all__ = ["filled", "make_sink", "store_url"]


@pytest.fixture
async def filled(store_url: str, upstream: FakeUpstream) -> Filled:
    """The store at `store_url` after four runs of real traffic (`views.fill_by_traffic`)."""
    return await fill_by_traffic(store_url, upstream)
