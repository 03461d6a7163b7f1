"""The record store's readers over one connection, as the app and the CLI open them: `runs`, `trips`, `spend`,
`recorded`. Each caller takes the reader of what it reads (the admin API runs and trips, the dashboard's pages
runs, trips and spend, `replay` and `export` the recorded traffic)."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from runguard.proxy.store.reading import Reading
from runguard.proxy.store.recorded import RecordedReader
from runguard.proxy.store.runs import RunReader
from runguard.proxy.store.spend import SpendReader
from runguard.proxy.store.trips import TripReader


class StoreReader:
    """The readers of one connection (`reading`): close it with `close()`."""

    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        self.runs = RunReader(reading)
        self.trips = TripReader(reading)
        self.spend = SpendReader(reading)
        self.recorded = RecordedReader(reading)

    @classmethod
    def on(
        cls, engine: AsyncEngine, *, idle_seconds: float = 3600.0, clock: Callable[[], float] = time.time
    ) -> StoreReader:
        """Readers on an engine someone else owns (the writer's, inside the proxy)."""
        return cls(Reading(engine, idle_seconds=idle_seconds, clock=clock))

    @classmethod
    def open(cls, database_url: str, *, idle_seconds: float = 3600.0) -> StoreReader:
        """Readers with an engine of their own; raises StoreMissing, ValueError."""
        return cls(Reading.open(database_url, idle_seconds=idle_seconds))

    def now(self) -> float:
        return self.reading.now()

    async def close(self) -> None:
        await self.reading.close()
