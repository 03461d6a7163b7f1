"""`QueueSink`: the guard's `RecordSink`, writing to the database off the hot path.

`submit()` appends to a bounded in-memory queue and returns: it never awaits,
never blocks and never raises; when the queue is full the record is dropped
and counted (`dropped`). One background task takes up to `batch_size` records
every `flush_interval` and writes them in one transaction: on a SQLite file
through a plain `sqlite3` connection on a thread of its own
(`sqlite_writer.py`), on PostgreSQL through asyncpg on the engine's pooled
connections (`postgres_writer.py`), otherwise (in-memory SQLite) through the
SQLAlchemy engine (`batch.py`).
When the database is down or slow the proxy goes on: the batch in hand is
retried with capped exponential backoff until it goes in (never thrown away
for a connectivity failure), new records wait in the queue, and `backlog`
says how many. A batch the database rejects for its data (not its
availability) is written row by row, so one bad row cannot stall the rest.

`lifetime` ties it to an aiohttp app (`cleanup_ctx`): start migrates and
starts the writer; shutdown flushes everything queued, then disposes the
engine. Schema migrations are retried in the background the same way, so a
database that is down at start delays the proxy by at most `STARTUP_WAIT`
seconds and does not stop it from serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Protocol

from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from runguard.config import StoreSettings
from runguard.proxy.store import batch as batches
from runguard.proxy.store.database import Target, make_engine, parse
from runguard.proxy.store.migrate import upgrade
from runguard.proxy.store.postgres_writer import PostgresWriter
from runguard.proxy.store.records import Record
from runguard.proxy.store.sqlite_writer import SqliteWriter

log = logging.getLogger("runguard.store")

FIRST_BACKOFF = 0.25
MAX_BACKOFF = 15.0
WRITE_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 30.0
STARTUP_WAIT = 5.0


def _ids() -> Iterator[str]:
    """Row ids unique across replicas and restarts: a random per-sink prefix and a counter."""
    prefix = secrets.token_hex(6)
    return (f"{prefix}-{n:x}" for n in itertools.count(1))


class BatchWriter(Protocol):
    """Writes one batch in one transaction; `rejects`: the errors that mean the data, not the database."""

    rejects: tuple[type[Exception], ...]

    async def write(self, batch: batches.Batch) -> None: ...

    async def close(self) -> None: ...


class QueueSink:
    """A bounded queue of records and the task that writes them in batches."""

    def __init__(
        self,
        database_url: str,
        *,
        record_bodies: bool = False,
        queue_size: int = 50_000,
        batch_size: int = 500,
        flush_interval: float = 0.25,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT,
        max_backoff: float = MAX_BACKOFF,
    ) -> None:
        self.target: Target = parse(database_url)
        self.engine: AsyncEngine = make_engine(self.target)  # migrations, and the reader's
        path = self.target.sqlite_path
        self.writer: BatchWriter
        if path is not None:
            self.writer = SqliteWriter(path)
        elif self.target.postgres:
            self.writer = PostgresWriter(self.engine)
        else:  # an in-memory SQLite database lives in the engine's one connection
            self.writer = batches.EngineWriter(self.engine)
        self._record_bodies = record_bodies
        self._queue: deque[Record] = deque()
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._shutdown_timeout = shutdown_timeout
        self._max_backoff = max_backoff
        self._ids = _ids()
        self._pending = 0  # records of the batch being written (or retried)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # set while nothing is queued or being written
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self._dropping = False  # the queue was full at the last submit
        self.written = 0
        self.lost = 0  # records still unwritten when `close` gave up
        self.failures = 0  # failed write attempts (each retried)
        self._busy = 0.0  # see `busy_seconds`
        self._writer_clocks_itself = hasattr(self.writer, "cpu_seconds")  # SQLite's thread counts its own CPU
        self.migrated = asyncio.Event()

    @classmethod
    def from_settings(cls, store: StoreSettings, shutdown_timeout: float = SHUTDOWN_TIMEOUT) -> QueueSink:
        """The sink `Settings.store` describes."""
        return cls(
            store.database_url,
            record_bodies=store.record_bodies,
            queue_size=store.queue_size,
            batch_size=store.batch_size,
            flush_interval=store.flush_interval,
            shutdown_timeout=shutdown_timeout,
        )

    @property
    def backlog(self) -> int:
        """Records accepted but not yet in the database."""
        return len(self._queue) + self._pending

    def submit(self, record: Record) -> None:
        if len(self._queue) >= self._queue_size:
            if not self._dropping:  # said once when dropping starts, once when it ends: never per record
                self._dropping = True
                log.warning(
                    "record store: %d records wait for the database (store.queue_size): new records are "
                    "dropped until it catches up (runguard_store_dropped_total counts them)",
                    self._queue_size,
                )
            self.dropped += 1
            return
        if self._dropping:
            self._dropping = False
            log.warning("record store: caught up; %d records dropped since the start", self.dropped)
        self._queue.append(record)
        self._idle.clear()
        if len(self._queue) >= self._batch_size:
            self._wake.set()

    # -- lifetime ------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="runguard-store-writer")
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("record store: the writer stopped: %r", task.exception(), exc_info=task.exception())

    async def close(self, within: float | None = None) -> None:
        """Flush what is queued for up to `within` seconds (default `shutdown_timeout`), then release the
        database. What could not be written by then is counted in `lost` and logged, exactly: the queue
        and the batch being written when the time ran out."""
        self._stopping.set()
        self._wake.set()
        limit = self._shutdown_timeout if within is None else within
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), limit)
            except TimeoutError:
                self.lost = self.backlog  # before the cancellation lets go of the batch in hand
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
                log.error(
                    "record store: shutdown gave up after %.1f s with %d records not written (%s does not "
                    "answer); %d written, %d dropped before",
                    limit,
                    self.lost,
                    self.target.describe(),
                    self.written,
                    self.dropped,
                )
        await self.writer.close()
        await self.engine.dispose()

    async def lifetime(self, _app: object, budget: Callable[[], float] | None = None) -> AsyncIterator[None]:
        """For `app.cleanup_ctx`: start on app start, flush on shutdown.

        The start waits up to `STARTUP_WAIT` seconds for the schema, so the store is ready when the
        proxy begins to serve; a database that does not answer by then only delays the records.
        `budget()`, when given, says how many seconds the shutdown has left for the last flush.
        """
        self.start()
        try:
            await asyncio.wait_for(asyncio.shield(self.migrated.wait()), STARTUP_WAIT)
        except TimeoutError:
            log.warning("record store: %s does not answer yet; serving, records queue", self.target.describe())
        yield
        await self.close(budget() if budget is not None else None)

    async def flush(self) -> None:
        """Wait until every record submitted so far is in the database (tests, `replay`)."""
        self._wake.set()
        if self._task is None or self._task.done():
            return
        idle = asyncio.ensure_future(self._idle.wait())
        await asyncio.wait({idle, self._task}, return_when=asyncio.FIRST_COMPLETED)
        idle.cancel()

    # -- the writer task -----------------------------------------------------------------

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[None]]) -> None:
        """Run `attempt()` until it succeeds. Only `close()` (its timeout) ends a database outage.

        Data errors (the writer's `rejects`) are not retried: the same rows would fail again.
        """
        rejects = self.writer.rejects
        delay = FIRST_BACKOFF
        failing = False
        while True:
            try:
                async with asyncio.timeout(WRITE_TIMEOUT):
                    await attempt()
                if failing:
                    log.warning("record store: %s works again (%d queued)", what, self.backlog)
                return
            except rejects:
                raise
            except Exception as exc:  # any database or network failure: keep the records, retry
                self.failures += 1
                if not failing:
                    log.warning("record store: %s failed, retrying (%d queued): %r", what, self.backlog, exc)
                failing = True
            if self._stopping.is_set():  # shutting down: retry often until close() gives up
                await asyncio.sleep(min(delay, 1.0))
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
            delay = min(delay * 2, self._max_backoff)

    async def _migrate(self) -> None:
        try:
            await upgrade(self.engine, self.target)
        except (DataError, IntegrityError) as exc:  # e.g. a racing DDL: worth another try, unlike bad rows
            raise RuntimeError(f"migration failed: {exc!r}") from exc

    async def _run(self) -> None:
        await self._retrying("schema migration", self._migrate)
        self.migrated.set()
        while True:
            if not self._queue:
                self._idle.set()
                if self._stopping.is_set():
                    return
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._flush_interval)
                continue
            if len(self._queue) < self._batch_size and not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):  # let a batch build up
                    await asyncio.wait_for(self._wake.wait(), self._flush_interval)
            await self._write_next()

    async def _write_next(self) -> None:
        began = time.perf_counter()
        try:
            await self._write_batch()
        finally:
            if not self._writer_clocks_itself:
                self._busy += time.perf_counter() - began

    @property
    def busy_seconds(self) -> float:
        """Time spent writing records (runguard_stage_seconds_total{stage="records"}): the CPU of a writer
        that counts its own (SQLite's thread) plus building its batches, else the writes' wall time."""
        return self._busy + float(getattr(self.writer, "cpu_seconds", 0.0))

    async def _write_batch(self) -> None:
        self._wake.clear()  # a submit filling the next batch while this one is written wakes the loop again
        count = min(len(self._queue), self._batch_size)
        records = [self._queue.popleft() for _ in range(count)]
        self._pending = count
        try:
            began = time.thread_time()
            batch = batches.build(records, self._ids, record_bodies=self._record_bodies)
            if self._writer_clocks_itself:
                self._busy += time.thread_time() - began
            if batch.unbuilt:
                self.dropped += len(batch.unbuilt)
                log.error("record store: dropped %d records no row can hold: %r", len(batch.unbuilt), batch.unbuilt[0])
            count = self._pending = len(batch)
            if not count:
                return
            try:
                await self._retrying("writing records", functools.partial(self.writer.write, batch))
                self.written += count
            except self.writer.rejects as exc:
                log.error("record store: the database rejected a batch (%r); writing its rows one by one", exc)
                self.written += await self._write_singly(batch)
        finally:
            self._pending = 0

    async def _write_singly(self, batch: batches.Batch) -> int:
        """Each record in its own transaction; the ones the database rejects are dropped and counted."""
        parts = [
            batches.Batch(requests=[pair], bodies=[b for b in batch.bodies if b["request_id"] == pair[0]["id"]])
            for pair in batch.requests
        ]
        parts += [batches.Batch(trips=[pair]) for pair in batch.trips]
        written = 0
        for part in parts:
            try:
                await self._retrying("writing records", functools.partial(self.writer.write, part))
                written += 1
            except self.writer.rejects as exc:
                self.dropped += 1
                log.error("record store: dropped a record the database rejects: %r", exc)
            self._pending -= 1  # this one is settled: no longer in the backlog
        return written
