"""Reading on SQLite and PostgreSQL: queries read together see one snapshot, rows stream, a missing SQLite file
is reported and never created."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from runguard.proxy.store import Reading, StoreMissing
from runguard.proxy.store.models import Request, Run
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory


def test_a_missing_sqlite_file_is_reported_not_made(tmp_path: Path) -> None:
    with pytest.raises(StoreMissing, match="no record store at"):
        Reading.open(f"sqlite+aiosqlite:///{tmp_path}/none/runguard.db")
    assert not (tmp_path / "none").exists()


async def test_reads_rows_counts_and_streams(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink()
    for index in (1, 2, 3):
        sink.submit(factory.request("run-r", index))
    await sink.flush()
    reading = Reading.open(store_url, idle_seconds=5.0)
    try:
        runs, requests = await reading.read(select(Run.run_id, Run.requests), select(Request.request_index))
        assert runs == [{"run_id": "run-r", "requests": 3}] and len(requests) == 3
        assert await reading.count(select(func.count()).select_from(Request)) == 3
        streamed = [row async for row in reading.stream(select(Request.request_index).order_by(Request.at), per=2)]
        assert [row["request_index"] for row in streamed] == [1, 2, 3]
        assert reading.idle_seconds == 5.0
    finally:
        await reading.close()
