"""Answering requests aiohttp cannot parse, without repeating them.

aiohttp answers a malformed request (a bad request line, a header with a
control byte, a line too long) with a 400 whose body quotes the offending
line, and logs that line with a traceback. The line may be
`GET /v1beta/...?key=AIza...` or `Authorization: Bearer sk-...`, so both
would put a client's key where it does not belong. `ProxyRunner` is an
`AppRunner` whose connections use `QuietRequestHandler`: for such a request
it logs one line naming the client and the kind of error, and answers a
fixed, OpenAI-style JSON 400. Every other error goes to aiohttp's own
handling.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from runguard.proxy.relay import error_body

log = logging.getLogger("runguard.http")


class QuietRequestHandler(RequestHandler):
    """aiohttp's connection handler, except that a request it cannot parse is neither echoed nor logged."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        # The exception's text quotes the request line or header it choked on: only its kind is logged.
        log.warning("malformed HTTP request from %s: %s", request.remote, type(exc).__name__)
        if request.writer.output_size > 0:
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        text = f"RunGuard could not parse this HTTP request ({type(exc).__name__})"
        response = web.Response(
            status=400, body=error_body(None, 400, text, "malformed_request"), content_type="application/json"
        )
        response.force_close()
        return response


class _QuietServer(web.Server):
    """aiohttp's low-level server, building `QuietRequestHandler`s for its connections."""

    def __call__(self) -> RequestHandler:
        return QuietRequestHandler(self, loop=self._loop, **self._kwargs)


class ProxyRunner(web.AppRunner):
    """An `AppRunner` (same arguments) whose connections answer unparsable requests with `QuietRequestHandler`."""

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()  # starts the app up, as AppRunner does
        return _QuietServer(
            made.request_handler,
            request_factory=made.request_factory,
            loop=asyncio.get_running_loop(),
            **self._kwargs,
        )
