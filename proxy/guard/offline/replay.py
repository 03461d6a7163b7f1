"""Replaying recorded traffic through the detectors, offline: what would have tripped, where.

The recorded exchanges (store.record_bodies, or a JSON-lines file) go through
a real `Guard` with in-memory state, in arrival order, with its clock (and
the state's TTL clock) set to each exchange's recorded time, so time-based
detectors and breaker cooldowns behave as they would have live. The recorded
run id is passed as the run header, so runs group exactly as they were
recorded. Once a run would have been stopped, its later exchanges are not
fed: they are what the stop would have avoided (requests and their cost from
the recorded usage and the pricing table).

File format (one JSON object per line, documented field by field in
docs/records.md; `store.export` writes it): run_id, at (epoch seconds), path,
request and response (a JSON value, or a string such as an SSE stream),
optional key_hash, status, answered_locally and error.

A request that got no answer from upstream is recorded with status null: its
upstream failed (a connect error, a timeout, a body that broke off), or the
proxy answered it itself (`answered_locally`: a breaker was open or a
detector stopped it). A replay feeds both: the first as the upstream failure
it was, the second as a request whose answer is unknown (its response phase
is skipped when the candidate configuration lets it through).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from runguard.config import Settings
from runguard.detectors.support import Detector
from runguard.proxy.core.events import ResponseInfo
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.guard import Guard
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.observer import NullObserver
from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.registry import REGISTRY, adapter_for
from runguard.proxy.providers.routes import Route, resolve
from runguard.proxy.state import MemoryState, ScopeTtls
from runguard.proxy.store.records import Record, TripRecord


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded request and the answer it got."""

    run_id: str
    at: float
    path: str
    request: bytes
    response: bytes
    status: int | None = 200  # None: no answer came from upstream
    key_hash: str = "replay"
    answered_locally: bool = False  # the proxy answered it (nothing went upstream)
    error: str | None = None  # why upstream gave no answer, when it failed


@dataclass(slots=True)
class RunReplay:
    """One run as replayed: its requests, and where it would have been stopped."""

    run_id: str
    requests: int = 0
    usd: float = 0.0
    stopped_at: int | None = None  # index of the request the proxy would have answered locally
    detector: str | None = None
    reason: str | None = None
    avoided_requests: int = 0  # recorded requests after the stop (the agent would have ended)
    avoided_usd: float = 0.0
    unpriced: int = 0  # requests let through whose model has no price: their cost is unknown, not in `usd`
    avoided_unpriced: int = 0  # avoided requests whose model has no price (not in `avoided_usd`)
    unanswered: int = 0  # requests let through here that were answered locally live (their answer is unknown)


@dataclass(slots=True)
class ReplayReport:
    runs: dict[str, RunReplay] = field(default_factory=dict)
    trips: list[TripRecord] = field(default_factory=list)  # blocking and warning verdicts, in order
    skipped: int = 0  # exchanges no adapter reads (unknown path, other API, unparsable body)

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": [dataclasses.asdict(run) for run in self.runs.values()],
            "trips": [{**dataclasses.asdict(trip), "evidence": dict(trip.evidence)} for trip in self.trips],
            "skipped": self.skipped,
        }


class _Clock:
    """The guard's clock during a replay: the recorded time of the exchange being fed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Trips:
    """The guard's sink during a replay: keeps the trips; of request records, counts the unpriced ones in
    their run."""

    def __init__(self, report: ReplayReport) -> None:
        self._report = report

    def submit(self, record: Record) -> None:
        if isinstance(record, TripRecord):
            self._report.trips.append(record)
        elif record.unpriced and (run := self._report.runs.get(record.run_id)) is not None:
            run.unpriced += 1


def _raw(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return orjson.dumps(value)


def _exchange(item: dict[str, Any]) -> Exchange:
    return Exchange(
        run_id=str(item["run_id"]),
        at=float(item["at"]),
        path=str(item["path"]),
        request=_raw(item["request"]),
        response=_raw(item.get("response", b"")),
        status=item.get("status", 200),
        key_hash=str(item.get("key_hash", "replay")),
        answered_locally=bool(item.get("answered_locally", False)),
        error=item.get("error"),
    )


def read_file(path: Path, run_id: str | None = None, read: Callable[[int], None] | None = None) -> list[Exchange]:
    """Exchanges from a JSON-lines file (docs/records.md), in arrival order, of one run when `run_id` is
    given; raises ValueError naming the bad line. `read` is called with the bytes of each line read."""
    exchanges = []
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if read is not None:
                read(len(line))
            if not line.strip():
                continue
            try:
                exchange = _exchange(orjson.loads(line))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{number}: not a recorded exchange ({exc!r})") from exc
            if run_id is None or exchange.run_id == run_id:
                exchanges.append(exchange)
    return sorted(exchanges, key=lambda e: e.at)


async def from_rows(rows: AsyncIterable[dict[str, Any]]) -> AsyncIterator[Exchange]:
    """Exchanges from `RecordedReader.exchanges()` rows."""
    async for row in rows:
        yield Exchange(
            run_id=row["run_id"],
            at=row["at"],
            path=row["path"],
            request=bytes(row["request"]),
            response=bytes(row["response"]),
            status=row["status"],
            key_hash=row["key_hash"],
            answered_locally=row["status"] is None and row["blocked_by"] is not None,
            error=row["error"],
        )


def _route(path: str) -> Route | None:
    """The route of a recorded path. A record keeps no headers, so a path that header-less routing only
    forwards (Anthropic's `/v1/messages`, routed live by its `anthropic-version` header) is read by the
    door such a header opens."""
    route = resolve(path)
    if route is not None and adapter_for(route.api) is not None:
        return route
    marked = resolve(path, facts=REGISTRY.header_facts(dict.fromkeys(REGISTRY.fact_headers, "")))
    return marked if marked is not None and adapter_for(marked.api) is not None else route


def _response(adapter: Adapter, exchange: Exchange, stream: bool) -> ResponseInfo:
    if stream or exchange.response.lstrip().startswith((b"data:", b"event:")):
        parser = adapter.stream_parser()
        parser.feed(exchange.response)
        return parser.close()
    return adapter.parse_response(exchange.response)


class Replayer:
    """A guard over fresh in-memory state, fed one exchange at a time."""

    def __init__(self, settings: Settings, detectors: list[Detector[Any]]) -> None:
        self.report = ReplayReport()
        self._clock = _Clock()
        state = MemoryState(
            ScopeTtls.of_runs(settings.runs.idle_seconds, settings.runs.remember_seconds),
            settings.runs.max_runs,
            clock=self._clock,
        )
        self._tables = ModelTables(settings.pricing_file, settings.models_file)
        policy = Policy(detectors, settings.guard)
        sink = _Trips(self.report)
        self._guard = Guard(settings, state, policy, self._tables, sink, NullObserver(), self._clock)

    def _avoid(self, run: RunReplay, model: str, response: ResponseInfo) -> None:
        run.avoided_requests += 1
        usd = self._tables.bill(model, response.usage)
        if usd is None:
            run.avoided_unpriced += 1
        else:
            run.avoided_usd += usd

    def _stop(self, run: RunReplay, index: int, detector: str | None) -> None:
        run.stopped_at, run.detector = index, detector
        reason = next((t.reason for t in reversed(self.report.trips) if t.detector == detector), None)
        run.reason = reason

    async def feed(self, exchange: Exchange) -> None:
        route = _route(exchange.path)
        adapter = adapter_for(route.api) if route is not None else None
        if route is None or adapter is None:
            self.report.skipped += 1
            return
        info = adapter.parse_request(exchange.request, RequestContext(route.model, None, route.stream))
        if info.parse_error:
            self.report.skipped += 1
            return
        run = self.report.runs.setdefault(exchange.run_id, RunReplay(exchange.run_id))
        stream = info.stream or route.stream
        if run.stopped_at is not None:
            self._avoid(run, info.model, _response(adapter, exchange, stream))
            return
        self._clock.now = exchange.at
        ticket = await self._guard.admit(
            adapter, info, body=exchange.request, key_hash=exchange.key_hash, header_run=exchange.run_id
        )
        index = ticket.facts.request_index if ticket.facts else run.requests + 1
        if ticket.answer is not None:
            await self._guard.complete(ticket, None, client_status=ticket.answer.status)
            self._stop(run, index, ticket.blocked_by)
            self._avoid(run, info.model, _response(adapter, exchange, stream))
            return
        run.requests += 1
        if exchange.answered_locally:  # let through here, stopped live: what upstream would say is unknown
            run.unanswered += 1
            await self._guard.complete(ticket, None, client_status=None)
            return
        if exchange.status is None:  # the upstream failed live: no response, as the guard saw it then
            response = ResponseInfo(error=exchange.error or "no response from upstream", complete=False)
        else:
            response = _response(adapter, exchange, stream)
        seen = self._guard.response_seen(ticket, response, exchange.status, 0.0)
        replaced = self._guard.inspect(ticket, seen) if not stream else None
        await self._guard.complete(ticket, seen, client_status=exchange.status)
        run.usd += seen.usd
        if replaced is not None:  # the client would have got the synthetic answer instead of this one
            self._stop(run, index, ticket.blocked_by)


async def replay(
    exchanges: Iterable[Exchange] | AsyncIterable[Exchange],
    settings: Settings,
    detectors: list[Detector[Any]],
    fed: Callable[[], None] | None = None,
) -> ReplayReport:
    """Feed every exchange (in arrival order) and report what would have tripped where;
    `fed` is called after each exchange (a progress bar)."""
    replayer = Replayer(settings, detectors)
    if isinstance(exchanges, AsyncIterable):
        async for exchange in exchanges:
            await replayer.feed(exchange)
            if fed is not None:
                fed()
    else:
        for exchange in exchanges:
            await replayer.feed(exchange)
            if fed is not None:
                fed()
    return replayer.report
