"""Stores filled for the readers' tests (`test_runs`, `test_trips`, `test_spend`, `test_recorded`)."""

from __future__ import annotations

from runguard.proxy.store import StoreReader
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory


async def a_day(make_sink: SinkFactory, *, record_bodies: bool = False) -> StoreReader:
    """`factory.a_day_of_runs()`, read at T0 + 100 with runs idle after 600 s."""
    sink = make_sink(record_bodies=record_bodies)
    for record in factory.a_day_of_runs():
        sink.submit(record)
    await sink.flush()
    return StoreReader.on(sink.engine, idle_seconds=600, clock=lambda: factory.T0 + 100)


async def many(make_sink: SinkFactory) -> StoreReader:
    """`factory.many_runs()`, read at T0 + 200 with runs idle after 600 s."""
    sink = make_sink(record_bodies=True)
    for record in factory.many_runs():
        sink.submit(record)
    await sink.flush()
    return StoreReader.on(sink.engine, idle_seconds=600, clock=lambda: factory.T0 + 200)
