"""Assembling the proxy: `create_app(settings) -> web.Application`.

App state lives under typed `web.AppKey`s; lifetimes (upstream pools, the
state backend, background work) are tied to the app with `cleanup_ctx`, so
nothing is module-global and tests can run several proxies in one process.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from runguard.config import Settings
from runguard.detectors.support import Detector
from runguard.proxy.admin.api import RESET_LOG, STORE_READER, AdminApi
from runguard.proxy.admin.ui.routes import Dashboard
from runguard.proxy.core.safe_text import proxy_url
from runguard.proxy.guard import FanOut, Guard, ModelTables, Observer, Policy, accounting
from runguard.proxy.http.handlers import handle
from runguard.proxy.observe import AccessLog, Alerts, Metrics, SpendMetrics, state_metrics
from runguard.proxy.observe.telemetry import setup as telemetry
from runguard.proxy.providers.common.history import HistoryCache
from runguard.proxy.relay import CONTEXT, ProxyContext, Shutdown, Upstreams
from runguard.proxy.runs import Accounts, KeyHasher, load_salt
from runguard.proxy.serve.restore import ReadLive, Restore
from runguard.proxy.serve.watch import Watch
from runguard.proxy.state import MemoryState, ScopeTtls, StateBackend
from runguard.proxy.store.records import Record, RecordSink

log = logging.getLogger("runguard.app")

STATE: web.AppKey[StateBackend] = web.AppKey("runguard_state")
SHUTDOWN: web.AppKey[Shutdown] = web.AppKey("runguard_shutdown", Shutdown)
WATCH: web.AppKey[Watch] = web.AppKey("runguard_watch", Watch)


class DiscardSink:
    """A sink that keeps nothing (used when no store is configured)."""

    def submit(self, record: Record) -> None:
        pass


def build_state(settings: Settings) -> StateBackend:
    ttls = ScopeTtls.of_runs(settings.runs.idle_seconds, settings.runs.remember_seconds)
    if settings.state.sentinels:
        return _sentinel_state(settings, ttls)
    if settings.state.url:
        from runguard.proxy.state import RedisState

        return RedisState.from_url(
            settings.state.url,
            key_prefix=settings.state.key_prefix,
            ttls=ttls,
            timeout=settings.state.timeout,
            max_connections=settings.state.max_connections,
        )
    return MemoryState(
        ttls=ttls,
        max_scopes=settings.runs.max_runs,
        held=accounting.HELD_FIELDS,
        max_runs_per_tenant=settings.runs.max_runs_per_tenant,
    )


def _sentinel_state(settings: Settings, ttls: ScopeTtls) -> StateBackend:
    from redis.asyncio.connection import parse_url

    from runguard.proxy.state import RedisState

    cfg = settings.state
    given = parse_url(cfg.url) if cfg.url else {}
    addresses = [(host, int(port)) for host, _, port in (a.rpartition(":") for a in cfg.sentinels)]
    return RedisState.from_sentinels(
        addresses,
        cfg.sentinel_service,
        key_prefix=cfg.key_prefix,
        ttls=ttls,
        timeout=cfg.timeout,
        max_connections=cfg.max_connections,
        db=int(given.get("db", 0)),
        password=given.get("password"),
    )


def install_store(
    app: web.Application, settings: Settings, shutdown: Shutdown | None = None
) -> tuple[RecordSink, ReadLive, Callable[[], Any], Callable[[], Awaitable[None]]]:
    """The record store named by `store.database_url`: its queue as the sink, its reader for the admin API,
    its resets log; and what a rebuild of the state reads (`store.live`), once the store's schema is there.

    Its lifetime goes on `cleanup_ctx` before the app's own, so on shutdown it
    runs after in-flight requests have finished and flushes their records, for
    what is left of the grace period (`shutdown`).
    SQLAlchemy is imported only here, when a store is configured.
    """
    from runguard.config import ConfigError
    from runguard.proxy.store import QueueSink, StoreReader
    from runguard.proxy.store.live import read_live
    from runguard.proxy.store.resets import ResetLog

    try:
        store = QueueSink.from_settings(settings.store, settings.server.shutdown_grace_seconds)
    except ValueError as exc:
        raise ConfigError(f"store.database_url: {exc}") from exc
    budget = shutdown.remaining if shutdown is not None else None
    app.cleanup_ctx.append(functools.partial(store.lifetime, budget=budget))
    reader = StoreReader.on(store.engine, idle_seconds=settings.runs.idle_seconds)
    app[STORE_READER] = reader

    async def close_reader(_app: web.Application) -> None:
        await reader.close()

    app.on_cleanup.append(close_reader)
    app[RESET_LOG] = ResetLog(store.engine)
    read = functools.partial(
        read_live,
        store.engine,
        idle_seconds=settings.runs.idle_seconds,
        breaker_seconds=settings.guard.breaker.max_cooldown_seconds,
    )
    return store, read, store.migrated.wait, store.flush


def restoring(app: web.Application, settings: Settings, restore: Restore) -> None:
    """The state rebuilt from the records before the port opens (on start-up, after the store's start, which
    `cleanup_ctx` runs first); a shared state watched for what it loses (`watch`)."""
    if not settings.state.shared:
        app.on_startup.append(restore.at_start)
        return
    watch = Watch(restore, restore.state, settings.state.generation_seconds, restore.clock)
    app[WATCH] = watch
    app.on_startup.append(watch.at_start)
    app.on_shutdown.append(watch.stop)


def _default_detectors() -> list[Detector[Any]]:
    from runguard.detectors.registry import default_detectors

    return default_detectors()


async def health(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    degraded = ctx.guard.degraded_since is not None
    backend = "redis" if ctx.settings.state.shared else "memory"
    body: dict[str, object] = {"status": "degraded" if degraded else "ok", "state": backend}
    held = state_metrics.figures(request.app[STATE])
    if held is not None:
        body["entries"] = held  # what memory holds, and what it dropped to make room (`state_metrics`)
    watch = request.app.get(WATCH)
    if watch is not None and watch.rebuilding:
        body["rebuilding"] = True  # the state is being rebuilt from the records (`watch`)
    return web.json_response(body, status=200)


def _observers(app: web.Application, settings: Settings, metrics: Metrics, given: Observer | None) -> Observer:
    """What sees every request and trip: `given`, the metrics, spend by key, the access log and alerts."""
    observers: list[Observer] = [given] if given is not None else []
    observers.append(metrics)
    spend = SpendMetrics(settings.guard.key_labels)  # spend by key label
    metrics.registry.register(spend)
    observers.append(spend)
    if settings.log.access_log:
        access = AccessLog()
        observers.append(access)
        app.cleanup_ctx.append(access.lifetime)  # before the app's own: written after in-flight requests end
    if settings.alerts.webhooks:
        url = proxy_url(settings.server.host, settings.server.port)
        alerts = Alerts(settings.alerts, outcome=metrics.alert_outcome, proxy_url=url)
        observers.append(alerts)
        app.cleanup_ctx.append(alerts.lifetime)  # first in, so cleaned up last: trips of finishing requests go out
    return FanOut(observers)


def create_app(
    settings: Settings,
    *,
    state: StateBackend | None = None,
    sink: RecordSink | None = None,
    detectors: Sequence[Detector[Any]] | None = None,
    observer: Observer | None = None,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    app = web.Application(client_max_size=settings.server.max_body_bytes + 1)
    backend = state if state is not None else build_state(settings)
    metrics = Metrics()
    observer = _observers(app, settings, metrics, observer)
    shutdown = Shutdown(settings.server.shutdown_grace_seconds)
    app[SHUTDOWN] = shutdown
    policy = Policy(list(detectors) if detectors is not None else _default_detectors(), settings.guard)
    if sink is None and settings.store.database_url:
        sink, read, ready, flush = install_store(app, settings, shutdown)
        fresh = state is None and not settings.state.shared  # in-memory state made here: empty
        restore = Restore(settings, backend, policy, read, ready, clock, fresh=fresh, flush=flush)
        restoring(app, settings, restore)
    tables = ModelTables(settings.pricing_file, settings.models_file)
    salt = load_salt(settings.runs.key_salt.get_secret_value() if settings.runs.key_salt else None)
    hasher = KeyHasher(salt)
    guard = Guard(settings, backend, policy, tables, sink or DiscardSink(), observer, clock)
    history = HistoryCache(settings.server.history_cache_mb << 20) if settings.server.history_cache_mb else None
    context = ProxyContext(
        settings,
        guard,
        Upstreams(settings.upstreams),
        hasher,
        observer,
        set(),
        shutdown=shutdown,
        history=history,
        state_never_waits=backend.never_waits,
        accounts=Accounts(backend, hasher),
    )
    app[CONTEXT] = context
    app[STATE] = backend
    metrics.registry.register(state_metrics.StateMetrics(backend))
    guard.on_request = telemetry.install(app, settings, metrics.registry)  # before `lifetime`: cleaned up after it
    metrics.watch(sink, lambda: guard.degraded_since is not None, history, guard.stages.seconds)

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        yield
        if context.background:
            await asyncio.wait(set(context.background), timeout=shutdown.remaining())
        await guard.settle(shutdown.remaining())  # undos of abandoned requests give their slots back
        await context.upstreams.close()
        await backend.close()

    async def preload_tokens(_app: web.Application) -> None:
        # tiktoken's tables take about a second to load: in a thread before serving, not at the
        # first stream without usage on the event loop (nothing is downloaded: see `tokens`).
        await asyncio.to_thread(guard.tokens.preload)

    async def stopping(_app: web.Application) -> None:
        shutdown.begin()
        context.stop_reading()

    app.on_startup.append(preload_tokens)
    app.on_shutdown.append(stopping)
    app.cleanup_ctx.append(lifetime)
    app.router.add_get("/runguard/health", health)
    admin = AdminApi(settings.server, backend, metrics)
    admin.add_routes(app)
    Dashboard(settings, backend, policy).add_routes(app, admin.guarded)
    app.router.add_route("*", "/{tail:.*}", metrics.counted(handle, own_paths=admin.refusal))
    return app
