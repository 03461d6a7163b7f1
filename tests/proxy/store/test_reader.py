"""StoreReader: the readers of runs, trips, spend and recorded traffic share one connection and close with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from runguard.proxy.store import StoreMissing, StoreReader
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory


async def test_one_connection_for_every_reader(make_sink: SinkFactory, store_url: str) -> None:
    sink = make_sink()
    sink.submit(factory.request("run-x", 1, tool_calls=(), finish_reason="stop"))
    sink.submit(factory.trip("run-x"))
    await sink.flush()
    reader = StoreReader.open(store_url)
    try:
        assert (await reader.runs.one("run-x") or {})["status"] == "tripped:non_progress"
        assert [t["run_id"] for t in await reader.trips.recent()] == ["run-x"]
        assert list(await reader.spend.today(["kh-test"])) in ([], ["kh-test"])  # today is the clock's day
        assert await reader.recorded.count() == 0
    finally:
        await reader.close()


def test_open_reports_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(StoreMissing):
        StoreReader.open(f"sqlite+aiosqlite:///{tmp_path}/runguard.db")
