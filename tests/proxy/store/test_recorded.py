"""RecordedReader on SQLite and PostgreSQL: recorded traffic only when recording is on, counted and streamed."""

from __future__ import annotations

import pytest

from tests.proxy.store import factory, readers
from tests.proxy.store.conftest import SinkFactory


@pytest.mark.parametrize("record_bodies", [False, True])
async def test_bodies_only_when_recording_is_on(make_sink: SinkFactory, record_bodies: bool) -> None:
    reader = await readers.a_day(make_sink, record_bodies=record_bodies)
    recorded = [row async for row in reader.recorded.exchanges()]
    assert await reader.recorded.count() == len(recorded)
    if not record_bodies:
        assert recorded == []
        return
    assert len(recorded) == 1
    row = recorded[0]
    assert row["run_id"] == "done" and row["path"] == "/v1/chat/completions" and row["request_index"] == 1
    assert row["request"] == factory.body().request and row["status"] == 200
    assert await reader.recorded.count("done") == 1 and await reader.recorded.count("looped") == 0
    assert [r async for r in reader.recorded.exchanges(since=factory.T0 + 2)] == []
