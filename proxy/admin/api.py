"""The admin HTTP API under `/runguard/`: runs, trips, manual resets, metrics.

Routes (JSON unless noted):
  GET  /runguard/metrics                    Prometheus text format
  GET  /runguard/runs?limit=N               recent runs (needs the record store)
  GET  /runguard/runs/{run_id}?tenant=T     one run: breaker, live counters, stored totals, timeline, trips
                                            (named fields, documented in docs/admin-api.md)
  GET  /runguard/trips?limit=N&run_id=R     recent trips (needs the record store)
  POST /runguard/runs/{run_id}/reset?tenant=T   clear the run's breaker and counters
  POST /runguard/keys/{key_hash}/reset?model=M   clear the key's breaker (and key+model's)

Access is decided by `admin_access.admin_refusal`, which every route under
`/runguard/` runs first (`guarded`; the catch-all route runs it for the other
paths under `/runguard`): Host and Origin must name this proxy, mutating requests carry JSON, and the token and bind
rules of `admin_access.admin_denial` apply (docs/security.md, "Admin API").
`/runguard/health` is registered by the app and is never protected.

A run id is the one its requests sent; its state is its tenant's (see
`tenants`). Without `tenant`, the run's tenant is found in the state; when
runs of several tenants have that id, the answer is 409 and names them.

Resets go through the state backend, so with shared Redis state one reset
reopens the run on every replica. With a record store, each reset is also
written to it first (`RESET_LOG`), so a rebuild of the state from the records
after a restart does not bring back what it released; the answer's `recorded`
says whether it was. Nothing here returns an API key: runs are
named by id and keys by their salted hash.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import orjson
from aiohttp import web

from runguard.config import ServerSettings
from runguard.proxy.admin import run_state
from runguard.proxy.admin.access import admin_denial, admin_refusal, checked, is_loopback
from runguard.proxy.core.errors import RunGuardError, StateUnavailable
from runguard.proxy.core.ops import Scope
from runguard.proxy.core.safe_text import printable
from runguard.proxy.guard import BreakerRecord, breaker, scope_ids
from runguard.proxy.observe import Metrics
from runguard.proxy.runs import tenants
from runguard.proxy.state import StateBackend

log = logging.getLogger("runguard.admin")

__all__ = ["RESET_LOG", "STORE_READER", "AdminApi", "ResetRecorder", "StoreReader", "admin_denial", "is_loopback"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_LIMIT = 1000
T = TypeVar("T")


class RunRecords(Protocol):
    """The runs the admin API reads (`runguard.proxy.store.runs.RunReader`)."""

    async def recent(self, limit: int) -> Sequence[Mapping[str, Any]]: ...

    async def one(self, run_id: str) -> Mapping[str, Any] | None: ...

    async def timeline(self, run_id: str) -> Sequence[Mapping[str, Any]] | None: ...


class TripRecords(Protocol):
    """The trips the admin API reads (`runguard.proxy.store.trips.TripReader`)."""

    async def recent(self, limit: int, run_id: str | None = None) -> Sequence[Mapping[str, Any]]: ...


class StoreReader(Protocol):
    """What the admin API reads from the record store (installed under `STORE_READER`:
    `runguard.proxy.store.StoreReader`)."""

    @property
    def runs(self) -> RunRecords: ...

    @property
    def trips(self) -> TripRecords: ...


STORE_READER: web.AppKey[StoreReader] = web.AppKey("runguard_store_reader")


class ResetRecorder(Protocol):
    """Where resets are kept, so a rebuild of the state from the records skips what they released
    (installed under `RESET_LOG` with the record store: `runguard.proxy.store.resets.ResetLog`)."""

    async def record(self, scope: str, target: str, tenant: str | None = None) -> float: ...


RESET_LOG: web.AppKey[ResetRecorder] = web.AppKey("runguard_reset_log")


class StoreUnavailable(RunGuardError):
    """The record store did not answer a read (the database is down or slow)."""


async def _read(query: Awaitable[T]) -> T:
    """A store read; any failure becomes StoreUnavailable (answered 503), the proxy itself goes on."""
    try:
        return await query
    except Exception as exc:
        log.warning("record store read failed: %r", exc)
        raise StoreUnavailable(str(exc) or type(exc).__name__) from exc


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(payload, default=str), content_type="application/json", headers=headers
    )


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return _json({"error": message}, status, headers)


class BadQuery(RunGuardError):
    """A query parameter the admin API cannot use (answered 400)."""


def _limit(request: web.Request) -> int:
    raw = request.query.get("limit", "50")
    try:
        limit = int(raw)
    except ValueError:
        raise BadQuery(f"limit must be an integer, got {raw!r}") from None
    if limit < 1:
        raise BadQuery(f"limit must be at least 1, got {limit}")
    return min(limit, MAX_LIMIT)


class AdminApi:
    """The admin handlers of one app: its state backend, metrics and (when installed) store reader."""

    def __init__(self, server: ServerSettings, state: StateBackend, metrics: Metrics) -> None:
        self._server = server
        self._state = state
        self._metrics = metrics

    def add_routes(self, app: web.Application) -> None:
        """Register every admin route on `app` (before the catch-all proxy route), each behind the access check."""
        router = app.router
        router.add_get("/runguard/metrics", self._guarded(self.metrics))
        router.add_get("/runguard/runs", self._guarded(self.runs))
        router.add_get("/runguard/runs/{run_id}", self._guarded(self.run))
        router.add_get("/runguard/trips", self._guarded(self.trips))
        router.add_post("/runguard/runs/{run_id}/reset", self._guarded(self.reset_run))
        router.add_post("/runguard/keys/{key_hash}/reset", self._guarded(self.reset_key))

    def guarded(self, handler: Handler) -> Handler:
        """`handler` behind the access check, its failures answered as the admin API's are (for the dashboard's
        pages)."""
        return self._guarded(handler)

    def _guarded(self, handler: Handler) -> Handler:
        """`handler` behind the access check (`admin_access.checked`), its failures answered as JSON errors."""

        async def guarded(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except StateUnavailable as exc:
                return _error(503, f"the state backend is unavailable: {exc}")
            except StoreUnavailable as exc:
                return _error(503, f"the record store is unavailable: {exc}")
            except BadQuery as exc:
                return _error(400, str(exc))

        return checked(self._server, guarded)

    async def refusal(self, request: web.Request) -> web.StreamResponse | None:
        """The access check alone (`admin_access.admin_refusal`), for the paths under `/runguard` that no admin
        route serves (the catch-all route runs it before anything else)."""
        return await admin_refusal(self._server, request)

    @staticmethod
    def _reader(request: web.Request) -> StoreReader | None:
        return request.app.get(STORE_READER)

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        return self._metrics.exposition()

    async def runs(self, request: web.Request) -> web.StreamResponse:
        reader = self._reader(request)
        if reader is None:
            return _no_store("runs")
        return _json({"runs": await _read(reader.runs.recent(_limit(request)))})

    async def trips(self, request: web.Request) -> web.StreamResponse:
        reader = self._reader(request)
        if reader is None:
            return _no_store("trips")
        return _json({"trips": await _read(reader.trips.recent(_limit(request), request.query.get("run_id")))})

    async def _tenant_of(self, request: web.Request, run_id: str) -> str | web.Response | None:
        """The tenant whose run `run_id` the request means: `?tenant=`, else the one with state for it (None:
        none has); a 409 naming them when several have."""
        named = request.query.get("tenant")
        if named:
            return named
        found = await tenants.with_run(self._state, run_id)
        if len(found) > 1:
            return _json(
                {
                    "error": f"runs of {len(found)} tenants are named {run_id!r}: name one with ?tenant=",
                    "tenants": found,
                },
                409,
            )
        return found[0] if found else None

    async def run(self, request: web.Request) -> web.StreamResponse:
        run_id = request.match_info["run_id"]
        tenant = await self._tenant_of(request, run_id)
        if isinstance(tenant, web.Response):
            return tenant
        state_id = tenants.state_id(tenant, run_id) if tenant is not None else None
        fields = await self._state.read_scope(Scope.RUN, state_id) if state_id is not None else {}
        record = BreakerRecord.loads(fields.get(breaker.FIELD))
        reader = self._reader(request)
        timeline = summary = None
        trips: Sequence[Mapping[str, Any]] = ()
        if reader is not None:
            timeline = await _read(reader.runs.timeline(run_id))
            summary = await _read(reader.runs.one(run_id))
            trips = await _read(reader.trips.recent(MAX_LIMIT, run_id))
        live = run_state.live_view(fields)
        if live is None and record is None and not timeline and summary is None:
            return _error(404, f"no live state or records for run {run_id!r}")
        return _json(
            {
                "run_id": run_id,
                "tenant": tenant,
                "status": summary["status"] if summary is not None else "live",
                "breaker": run_state.breaker_view(record),
                "live": live,
                "summary": summary,
                "timeline": timeline,
                "trips": list(trips)[::-1],
                "store": reader is not None,
            }
        )

    async def reset_run(self, request: web.Request) -> web.StreamResponse:
        run_id = request.match_info["run_id"]
        tenant = await self._tenant_of(request, run_id)
        if isinstance(tenant, web.Response):
            return tenant
        recorded = await _record(request, "run", run_id, tenant)
        cleared = tenant is not None and await self._state.clear_scope(Scope.RUN, tenants.state_id(tenant, run_id))
        log.warning("admin reset of run %s of %s (%s)", printable(run_id), tenant, "cleared" if cleared else "no state")
        return _json({"run_id": run_id, "tenant": tenant, "cleared": cleared, "recorded": recorded})

    async def reset_key(self, request: web.Request) -> web.StreamResponse:
        key_hash = request.match_info["key_hash"]
        model = request.query.get("model")
        recorded = await _record(request, "key", key_hash)
        cleared = {"key": await self._state.clear_scope(Scope.KEY, key_hash)}
        if model:
            key_model = scope_ids("", key_hash, model, 0.0).key_model
            recorded = await _record(request, "key_model", key_model) and recorded
            cleared["key_model"] = await self._state.clear_scope(Scope.KEY_MODEL, key_model)
        shown = printable(f"{key_hash}{f' model {model}' if model else ''}")
        log.warning("admin reset of key %s: %s", shown, cleared)
        return _json({"key_hash": key_hash, "model": model, "cleared": cleared, "recorded": recorded})


async def _record(request: web.Request, scope: str, target: str, tenant: str | None = None) -> bool:
    """Keep a reset in the record store, if there is one: whether it was kept. A store that fails does not
    stop the reset (the state is cleared all the same); the answer says it was not recorded."""
    resets = request.app.get(RESET_LOG)
    if resets is None:
        return False
    try:
        await resets.record(scope, target, tenant)
    except Exception as exc:  # any database failure
        log.error(
            "admin reset of %s %s not recorded (a restart would bring it back): %r", scope, printable(target), exc
        )
        return False
    return True


def _no_store(what: str) -> web.Response:
    return _error(501, f"listing {what} needs the record store, and none is installed in this proxy")
