"""The admin HTTP API under `/runguard/`: runs, trips, manual resets, metrics.

Routes (JSON unless noted):
  GET  /runguard/metrics                    Prometheus text format
  GET  /runguard/runs?limit=N               recent runs (needs the record store)
  GET  /runguard/runs/{run_id}              one run: breaker, live counters, stored totals, timeline, trips
                                            (named fields, documented in docs/admin-api.md)
  GET  /runguard/trips?limit=N&run_id=R     recent trips (needs the record store)
  POST /runguard/runs/{run_id}/reset        clear the run's breaker and counters
  POST /runguard/keys/{key_hash}/reset?model=M   clear the key's breaker (and key+model's)

Access, decided by `admin_denial` before any handler runs:
- `server.admin_token` set: every route here needs `Authorization: Bearer
  <token>` (compared in constant time), metrics included.
- no token and bound to loopback: open (only local processes reach it).
- no token and bound beyond loopback: the admin routes answer 403, disabled.
  Metrics stay readable: they carry only bounded, content-free labels (no
  keys, hashes or run ids), and scrapers usually reach a sidecar over the pod
  network; set a token to protect them too.
`/runguard/health` is registered by the app and is never protected.

Resets go through the state backend, so with shared Redis state one reset
reopens the run on every replica. Nothing here returns an API key: runs are
named by id and keys by their salted hash.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import orjson
from aiohttp import web

from runguard.config.settings import ServerSettings
from runguard.detectors.ops import Scope
from runguard.proxy import breaker, run_state
from runguard.proxy.breaker import BreakerRecord
from runguard.proxy.errors import RunGuardError, StateUnavailable
from runguard.proxy.metrics import Metrics
from runguard.proxy.state.base import StateBackend
from runguard.proxy.ticket import scope_ids

log = logging.getLogger("runguard.admin")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_LIMIT = 1000
T = TypeVar("T")


class StoreReader(Protocol):
    """What the admin API reads from the record store (installed under `STORE_READER`)."""

    async def recent_runs(self, limit: int) -> Sequence[Mapping[str, Any]]: ...

    async def recent_trips(self, limit: int, run_id: str | None) -> Sequence[Mapping[str, Any]]: ...

    async def run_timeline(self, run_id: str) -> Sequence[Mapping[str, Any]] | None: ...

    async def run(self, run_id: str) -> Mapping[str, Any] | None: ...


STORE_READER: web.AppKey[StoreReader] = web.AppKey("runguard_store_reader")


class StoreUnavailable(RunGuardError):
    """The record store did not answer a read (the database is down or slow)."""


async def _read(query: Awaitable[T]) -> T:
    """A store read; any failure becomes StoreUnavailable (answered 503), the proxy itself goes on."""
    try:
        return await query
    except Exception as exc:
        log.warning("record store read failed: %r", exc)
        raise StoreUnavailable(str(exc) or type(exc).__name__) from exc


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(payload, default=str), content_type="application/json", headers=headers
    )


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return _json({"error": message}, status, headers)


def admin_denial(server: ServerSettings, authorization: str | None, *, admin: bool = True) -> web.Response | None:
    """The response refusing this caller, or None when it may go on (see the module docstring).

    `admin=False` is for metrics: only a configured token is enforced.
    """
    token = server.admin_token
    if token is None:
        if admin and not is_loopback(server.host):
            return _error(
                403,
                f"the admin API is disabled: the proxy is bound to {server.host} without server.admin_token "
                "(set RUNGUARD_ADMIN_TOKEN to enable it)",
            )
        return None
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode()):
        return None
    return _error(401, "admin token required: Authorization: Bearer <token>", {"WWW-Authenticate": "Bearer"})


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
        """Register every admin route on `app` (before the catch-all proxy route)."""
        router = app.router
        router.add_get("/runguard/metrics", self._guarded(self.metrics, admin=False))
        router.add_get("/runguard/runs", self._guarded(self.runs))
        router.add_get("/runguard/runs/{run_id}", self._guarded(self.run))
        router.add_get("/runguard/trips", self._guarded(self.trips))
        router.add_post("/runguard/runs/{run_id}/reset", self._guarded(self.reset_run))
        router.add_post("/runguard/keys/{key_hash}/reset", self._guarded(self.reset_key))

    def guarded(self, handler: Handler) -> Handler:
        """`handler` behind the admin API's access rules (for the dashboard's pages)."""
        return self._guarded(handler)

    def _guarded(self, handler: Handler, *, admin: bool = True) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            denied = admin_denial(self._server, request.headers.get("Authorization"), admin=admin)
            if denied is not None:
                return denied
            try:
                return await handler(request)
            except StateUnavailable as exc:
                return _error(503, f"the state backend is unavailable: {exc}")
            except StoreUnavailable as exc:
                return _error(503, f"the record store is unavailable: {exc}")
            except BadQuery as exc:
                return _error(400, str(exc))

        return guarded

    @staticmethod
    def _reader(request: web.Request) -> StoreReader | None:
        return request.app.get(STORE_READER)

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        return self._metrics.exposition()

    async def runs(self, request: web.Request) -> web.StreamResponse:
        reader = self._reader(request)
        if reader is None:
            return _no_store("runs")
        return _json({"runs": await _read(reader.recent_runs(_limit(request)))})

    async def trips(self, request: web.Request) -> web.StreamResponse:
        reader = self._reader(request)
        if reader is None:
            return _no_store("trips")
        return _json({"trips": await _read(reader.recent_trips(_limit(request), request.query.get("run_id")))})

    async def run(self, request: web.Request) -> web.StreamResponse:
        run_id = request.match_info["run_id"]
        fields = await self._state.read_scope(Scope.RUN, run_id)
        record = BreakerRecord.loads(fields.get(breaker.FIELD))
        reader = self._reader(request)
        timeline = summary = None
        trips: Sequence[Mapping[str, Any]] = ()
        if reader is not None:
            timeline = await _read(reader.run_timeline(run_id))
            summary = await _read(reader.run(run_id))
            trips = await _read(reader.recent_trips(MAX_LIMIT, run_id))
        live = run_state.live_view(fields)
        if live is None and record is None and not timeline and summary is None:
            return _error(404, f"no live state or records for run {run_id!r}")
        return _json(
            {
                "run_id": run_id,
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
        cleared = await self._state.clear_scope(Scope.RUN, run_id)
        log.warning("admin reset of run %s (%s)", run_id, "cleared" if cleared else "no state")
        return _json({"run_id": run_id, "cleared": cleared})

    async def reset_key(self, request: web.Request) -> web.StreamResponse:
        key_hash = request.match_info["key_hash"]
        model = request.query.get("model")
        cleared = {"key": await self._state.clear_scope(Scope.KEY, key_hash)}
        if model:
            key_model = scope_ids("", key_hash, model, 0.0).key_model
            cleared["key_model"] = await self._state.clear_scope(Scope.KEY_MODEL, key_model)
        log.warning("admin reset of key %s%s: %s", key_hash, f" model {model}" if model else "", cleared)
        return _json({"key_hash": key_hash, "model": model, "cleared": cleared})


def _no_store(what: str) -> web.Response:
    return _error(501, f"listing {what} needs the record store, and none is installed in this proxy")
