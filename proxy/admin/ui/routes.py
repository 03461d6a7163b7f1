"""The dashboard's routes under `/runguard/ui/`, behind the admin API's access rules.

Pages are plain server-rendered HTML (no JavaScript needed to read them; a
small shipped script only drives the reset buttons). Every route is wrapped by
the admin API's guard (`AdminApi.guarded`): the same rules as `/runguard/runs`
(loopback, or the admin token). Responses carry a Content-Security-Policy
that allows only the dashboard's own stylesheet and script (no inline script,
no framing), a second line of defence behind escaping.

Pages read the record store (through the app's `StoreReader`) and the shared
state backend, never this process's memory alone, so every replica shows the
same figures.
"""

from __future__ import annotations

import importlib
import importlib.resources
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from runguard.config import Settings
from runguard.proxy.admin.api import STORE_READER
from runguard.proxy.admin.ui.html import BASE, Html, layout, tag
from runguard.proxy.admin.ui.past_days import PastDays
from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.guard import Policy
from runguard.proxy.state import StateBackend

log = logging.getLogger("runguard.ui")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Guard = Callable[[Handler], Handler]
STATIC_TYPES = {"ui.css": "text/css", "ui.js": "text/javascript"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class UiContext:
    """What the pages read: settings, the shared state, the detectors' policy."""

    settings: Settings
    state: StateBackend
    policy: Policy
    past: PastDays = field(default_factory=PastDays)  # spend of ended days, read once


Page = Callable[[web.Request, UiContext], Awaitable[Html]]


class NotFound(Exception):
    """The page names something that is not there (answered 404 with the message)."""


def page_response(body: Html, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8", headers=SECURITY_HEADERS)


def reader_of(request: web.Request) -> object | None:
    """The app's store reader, when the record store is configured."""
    return request.app.get(STORE_READER)


def no_store() -> Html:
    return tag(
        "p",
        "No record store is configured, so there is no history to show. Set store.database_url "
        "(RUNGUARD_DATABASE_URL) to a SQLite file or a PostgreSQL database.",
        class_="notice",
    )


class Dashboard:
    """The dashboard of one app."""

    def __init__(self, settings: Settings, state: StateBackend, policy: Policy) -> None:
        self._ctx = UiContext(settings, state, policy)
        files = importlib.resources.files("runguard.proxy.admin.ui") / "static"
        self._static = {name: (files / name).read_bytes() for name in STATIC_TYPES}

    def add_routes(self, app: web.Application, guarded: Guard) -> None:
        """Register the pages on `app` (before the catch-all proxy route), each behind `guarded`."""
        router = app.router
        router.add_get("/runguard/ui", guarded(self._to_index))
        router.add_get("/runguard/ui/static/{name}", guarded(self._asset))
        for path, module in (
            ("/", "overview"),
            ("/runs", "runs_page"),
            ("/runs/{run_id:.+}", "run_page"),
            ("/trips", "trips_page"),
            ("/keys", "keys_page"),
            ("/detectors", "detectors_page"),
        ):
            router.add_get(f"{BASE}{path}", guarded(self._serve(module)))

    async def _to_index(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"{BASE}/")

    async def _asset(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in self._static:
            raise web.HTTPNotFound()
        return web.Response(body=self._static[name], content_type=STATIC_TYPES[name], headers=SECURITY_HEADERS)

    def _serve(self, module: str) -> Handler:
        """The handler of the page in `runguard.proxy.admin.ui.<module>`, imported on its first request (the pages
        import the store's queries, and SQLAlchemy with them, which a proxy without a store never needs)."""

        async def serve(request: web.Request) -> web.StreamResponse:
            page: Page = importlib.import_module(f"runguard.proxy.admin.ui.{module}").page
            try:
                return page_response(await page(request, self._ctx))
            except NotFound as exc:
                return page_response(layout("Not found", "", tag("p", str(exc), class_="notice")), 404)
            except StateUnavailable as exc:
                message = f"The state backend is unavailable: {exc}"
                return page_response(layout("Unavailable", "", tag("p", message, class_="notice")), 503)
            except web.HTTPException:
                raise
            except Exception as exc:  # a store that does not answer: say so, the proxy goes on
                log.warning("dashboard page %s failed: %r", request.path, exc, exc_info=True)
                message = f"The record store did not answer: {type(exc).__name__}: {exc}"
                return page_response(layout("Unavailable", "", tag("p", message, class_="notice")), 503)

        return serve
