"""The provider-facing request handler: parse, decide, forward, feed, decide, record.

Every blocking decision is made before the client response is prepared;
after that only an in-stream error event can end it. Requests the adapters
do not model (GETs, embeddings, files, countTokens) are forwarded untouched
and only counted, their bodies streamed on as they arrive, whatever their
size; of them, a Responses API poll (`GET /v1/responses/{id}`) is also read
once it is relayed, so a background response's cost is counted when it is
found finished (`background`). A WebSocket handshake is relayed as a socket
(`websocket`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from runguard.proxy.core.errors import UpstreamError
from runguard.proxy.core.events import Api, Provider, ResponseInfo
from runguard.proxy.core.frozen import frozen
from runguard.proxy.guard import unreadable
from runguard.proxy.guard.background import polled_id
from runguard.proxy.guard.nudge import with_note
from runguard.proxy.guard.policy import tightening_from
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.http.paths import REFUSED, canonical
from runguard.proxy.providers import credentials
from runguard.proxy.providers.base import Adapter, RequestContext, Synthetic
from runguard.proxy.providers.gemini.replies import stream_error_element
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.providers.routes import Route, gemini_streams_sse, raw_target, resolve
from runguard.proxy.relay import overhead
from runguard.proxy.relay.codec import BodyTooLarge, decode_body
from runguard.proxy.relay.context import CONTEXT, ProxyContext
from runguard.proxy.relay.headers import is_upgrade, upstream_request_headers
from runguard.proxy.relay.replies import provider_error, upstream_failed
from runguard.proxy.relay.stream_usage import UsageChunkFilter, with_usage_requested
from runguard.proxy.relay.streams import is_stream, relay_stream, whole_response
from runguard.proxy.relay.upstream import read_whole
from runguard.proxy.runs.keys import redact
from runguard.proxy.sockets import websocket
from runguard.proxy.store.records import RecordedBody

log = logging.getLogger("runguard.proxy")


async def _read_body(request: web.Request, limit: int) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge(f"request body of {request.content_length} bytes exceeds the {limit}-byte limit")
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(f"request body exceeds the {limit}-byte limit")
    return bytes(body)


def _synthetic(answer: Synthetic, ticket: Ticket) -> web.Response:
    headers = CIMultiDict(answer.headers)
    headers["x-runguard-run-id"] = ticket.run_id
    if ticket.blocked_by:
        headers["x-runguard-trip"] = ticket.blocked_by
    warning = ticket.warning_header()
    if warning:
        headers["x-runguard-warning"] = warning
    return web.Response(status=answer.status, headers=headers, body=answer.body)


def _credentials(request: web.Request) -> tuple[str, ...]:
    """The request's credentials, to mask in what the upstream says (its query parsed only if it may name one)."""
    query = request.query if credentials.may_name_one(request.query_string) else CIMultiDict[str]()
    return credentials.every_value(request.headers, query)


def _recorded(request: web.Request, body: bytes, response: bytes, status: int | None) -> RecordedBody:
    query = "&".join(f"{k}={v}" for k, v in request.query.items() if k.lower() not in credentials.QUERY_NAMES)
    # An upstream error may echo the request's key: the stored answer has it masked (as records do).
    said = redact(response.decode("utf-8", "surrogateescape"), _credentials(request))
    path = canonical(request.raw_path) or request.path  # as routed
    return RecordedBody(path, query, body, said.encode("utf-8", "surrogateescape"), status)


def _key_refusal(ctx: ProxyContext, route: Route, key_hash: str) -> web.Response | None:
    allowed = ctx.settings.runs.key_allowlist
    if not allowed or key_hash in allowed:
        return None
    return provider_error(
        route.dialect, 403, f"RunGuard: API key {key_hash} is not on this proxy's allowlist", "key_not_allowed"
    )


def _carries_gemini_key(request: web.Request, headers: CIMultiDict[str]) -> bool:
    """`x-goog-api-key` (among the `headers` that go upstream), or `?key=`: the query is parsed only when its
    text names a key (an OpenAI request, keyed by its Authorization header, then parses no query)."""
    return "x-goog-api-key" in headers or ("key" in request.query_string and "key" in request.query)


def _credential_refusal(route: Route, credential: credentials.Credential) -> web.Response:
    places = ", ".join(credential.conflict)
    return provider_error(
        route.dialect,
        400,
        f"RunGuard: this request carries different API keys ({places}); send one key, in one place",
        "conflicting_credentials",
    )


async def handle(request: web.Request) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    # What goes upstream is computed once, hop-by-hop headers (and those `Connection:` names) already out,
    # and the key is read from it: the key judged is the key sent (`credentials`).
    outgoing = upstream_request_headers(request.headers, ctx.own_headers)
    gemini_key, api_version = _carries_gemini_key(request, outgoing), "api-version" in request.query_string
    path = canonical(request.raw_path)
    if path is None:  # a spelling servers read differently (`paths`): refused before routing
        route = resolve(request.path, gemini_key, api_version)
        return provider_error(route.dialect if route else None, 404, f"RunGuard: {REFUSED}", "unknown_path")
    route = resolve(path, gemini_key, api_version)
    if route is None:
        return provider_error(None, 404, f"RunGuard: no provider serves {path}", "unknown_path")
    upgrade = is_upgrade(request.method, request.headers)
    protocols = websocket.offered_protocols(request) if upgrade else ()
    credential = credentials.read(route.provider, outgoing, request.query, protocols)
    if credential.conflict:
        return _credential_refusal(route, credential)
    credentials.drop_unread(route.provider, outgoing)
    key_hash = ctx.hasher.hash(credential.key)
    refusal = _key_refusal(ctx, route, key_hash)
    if refusal is not None:
        return refusal
    if upgrade:
        return await websocket.relay(request, ctx, route, key_hash, outgoing)
    if ctx.stopping.is_set() and not request.content.is_eof():
        # The rest of this body would be dropped (see `stop_reading`): say so now, the SDK retries elsewhere.
        return provider_error(route.dialect, 503, "RunGuard is shutting down; retry the request", "shutting_down")
    adapter = adapter_for(route.api) if request.method == "POST" else None
    if adapter is None and not _is_poll(request, route):
        # Nothing here is read: the body streams upstream as it arrives, whatever its size (a file upload).
        return await _passthrough(request, ctx, route, request.content if request.body_exists else b"", outgoing)
    task = asyncio.current_task()
    if task is not None:
        ctx.reading.add(task)
    try:
        body = await _read_body(request, ctx.settings.server.max_body_bytes)
    except BodyTooLarge as exc:
        return provider_error(route.dialect, 413, f"RunGuard: {exc}", "request_too_large")
    finally:
        ctx.reading.discard(task)
    if adapter is None:
        return await _poll(request, ctx, route, body, outgoing, key_hash)
    return await _guarded(request, ctx, route, adapter, body, key_hash, outgoing)


def _is_poll(request: web.Request, route: Route) -> bool:
    """`GET /v1/responses/{id}`: a Responses API poll, read once relayed (`_poll`)."""
    return request.method == "GET" and route.provider is Provider.OPENAI and polled_id(route.upstream_path) is not None


async def _send_untouched(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    body: bytes | aiohttp.StreamReader,
    headers: CIMultiDict[str],
) -> aiohttp.ClientResponse:
    """The request upstream as the client sent it, with the `headers` `handle` computed (hop-by-hop, RunGuard's
    own and unread credentials out); a body still arriving (`StreamReader`) streams on with the length the
    client declared."""
    if not isinstance(body, bytes) and request.content_length is not None:
        headers["Content-Length"] = str(request.content_length)
    overhead.sending(request)
    return await ctx.upstreams[route.provider].send(request.method, raw_target(route, request.raw_path), headers, body)


async def _passthrough(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    body: bytes | aiohttp.StreamReader,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    try:
        upstream = await _send_untouched(request, ctx, route, body, headers)
    except UpstreamError as exc:
        return upstream_failed(route.dialect, exc)
    async with upstream:
        overhead.answered(request)
        if is_stream(upstream, route.stream):
            out, _ = await relay_stream(request, upstream, None, CIMultiDict(), None)
            return out
        overhead.sending(request)
        try:
            raw = await read_whole(upstream)
        except UpstreamError as exc:
            return upstream_failed(route.dialect, exc)
        overhead.answered(request)
        return whole_response(upstream, raw, CIMultiDict())


async def _poll(
    request: web.Request, ctx: ProxyContext, route: Route, body: bytes, headers: CIMultiDict[str], key_hash: str
) -> web.StreamResponse:
    """`GET /v1/responses/{id}`, whole or a resumed stream: forwarded as `_passthrough` does, then read.

    What the client gets is what `_passthrough` gives it, byte for byte; the
    answer is read once it is sent (a stream: as it passes, as any stream),
    and one that finishes a background response is accounted for.
    """
    began = time.perf_counter()
    try:
        upstream = await _send_untouched(request, ctx, route, body, headers)
    except UpstreamError as exc:
        return upstream_failed(route.dialect, exc)
    sent = time.perf_counter()
    background = ctx.guard.background
    responses = ResponsesAdapter()
    async with upstream:
        status = upstream.status
        if is_stream(upstream, route.stream):
            parser = responses.stream_parser()

            def account() -> Coroutine[Any, Any, None]:
                latency = time.perf_counter() - sent
                info = _masked(parser.close(), request)
                return background.polled(
                    info, key_hash=key_hash, streamed=True, status=status, latency=latency, began=began
                )

            try:
                out, _ = await relay_stream(request, upstream, parser, CIMultiDict(), None)
            except (asyncio.CancelledError, ConnectionResetError):
                ctx.spawn(account())  # the client left: what passed may have finished the response
                raise
            await ctx.settle(account())
            return out
        try:
            raw = await read_whole(upstream)
        except UpstreamError as exc:
            return upstream_failed(route.dialect, exc)
        latency = time.perf_counter() - sent
        encoding = upstream.headers.get("Content-Encoding")

        async def account_whole() -> None:
            info = _poll_answer(responses, raw, encoding) if status == 200 else None
            if info is not None:
                await background.polled(
                    _masked(info, request),
                    key_hash=key_hash,
                    streamed=False,
                    status=status,
                    latency=latency,
                    began=began,
                )

        reply = whole_response(upstream, raw, CIMultiDict())
        overhead.stamp(request, reply.headers)
        try:
            await reply.prepare(request)
            await reply.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            ctx.spawn(account_whole())  # the response is finished upstream whether or not the client has it
            raise
        await ctx.settle(account_whole())
        return reply


def _masked(info: ResponseInfo, request: web.Request) -> ResponseInfo:
    """`info` with the request's credentials (and anything key-shaped) masked in the upstream's error text."""
    if not info.error:
        return info
    return dataclasses.replace(info, error=redact(info.error, _credentials(request)))


def _poll_answer(responses: ResponsesAdapter, raw: bytes, encoding: str | None) -> ResponseInfo | None:
    """A poll's answer read as a Responses body (read after the client has it); None if it cannot be decoded."""
    try:
        parsed = decode_body(raw, encoding, 1 << 30)
    except BodyTooLarge:
        return None
    return responses.parse_response(parsed) if parsed is not None else None


async def _guarded(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    adapter: Adapter,
    body: bytes,
    key_hash: str,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    settings = ctx.settings
    try:
        decoded = decode_body(body, request.headers.get("Content-Encoding"), settings.server.max_body_bytes)
    except BodyTooLarge as exc:
        return provider_error(route.dialect, 413, f"RunGuard: {exc}", "request_too_large")
    header_run, agent = ctx.names(request.headers)
    body_read = decoded or b""
    slot = ctx.slot(key_hash, header_run, body_read)
    json_array = route.stream and not gemini_streams_sse(request.query)
    context = RequestContext(route.model, agent, route.stream, history=slot, json_array_stream=json_array)
    info = adapter.parse_request(body_read, context)
    tight = tightening_from(request.headers)
    refused = ctx.guard.policy.header_errors(tight) if tight else None
    if refused:
        message = f"RunGuard: invalid X-RunGuard-* header: {'; '.join(refused)}"
        return provider_error(route.dialect, 400, message[:1000], "invalid_runguard_header")
    if decoded is None or info.parse_error:
        problem = info.parse_error if decoded is not None else "the Content-Encoding cannot be decoded"
        return await _unreadable(request, ctx, route, adapter, body, key_hash, problem or "unknown", headers)
    ticket = await ctx.guard.admit(adapter, info, body=decoded, key_hash=key_hash, header_run=header_run, tight=tight)
    ticket.upstream = route.provider  # Gemini's OpenAI-compatible Chat: provider gemini, api chat
    if tight:
        ticket.notes = ctx.guard.policy.ignored(key_hash, ticket.request.model, tight)
    ticket.credentials = functools.partial(_credentials, request)  # read only if an upstream error needs it
    ticket.traceparent, ticket.tracestate = request.headers.get("traceparent"), request.headers.get("tracestate")
    if ticket.answer is not None:
        # Recorded with no upstream answer (status None): a replay sees the request that was stopped.
        kept = _recorded(request, decoded, b"", None) if settings.store.record_bodies else None
        await ctx.settle(ctx.guard.complete(ticket, None, client_status=ticket.answer.status, body=kept))
        return _synthetic(ticket.answer, ticket)
    noted = with_note(info.api, decoded, ticket.note) if ticket.note is not None else None
    if noted is not None:
        # A nudge: the note spliced into the body, sent as plain JSON (its length is the new body's).
        body = decoded = noted
        headers.popall("Content-Encoding", None)
    rewrite: UsageChunkFilter | None = None
    if settings.upstreams.inject_stream_usage and info.api is Api.CHAT and info.stream and not info.include_usage:
        asked = with_usage_requested(decoded)
        if asked is not None:
            # An opt-in change to the body (the other is a nudge): sent as plain JSON, read back as plain SSE.
            body, rewrite = asked, UsageChunkFilter()
            headers.popall("Content-Encoding", None)
            headers.popall("Accept-Encoding", None)
    return await _forward(request, ctx, route, ticket, Outgoing(headers, body, rewrite))


async def _unreadable(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    adapter: Adapter,
    body: bytes,
    key_hash: str,
    problem: str,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    """A model request whose body cannot be read: judged by what needs no body, recorded with its parse error,
    then forwarded untouched or refused with a 400 (`guard.unreadable`; see `unreadable`)."""
    action = ctx.settings.guard.unreadable
    ctx.observer.parse_error(route.api.value)
    json_array = route.stream and not gemini_streams_sse(request.query)
    info = unreadable.request_info(
        adapter.api, problem, body, model=route.model, stream=route.stream, json_array=json_array
    )
    header_run, _ = ctx.names(request.headers)
    tight = tightening_from(request.headers)
    ticket = await ctx.guard.admit(adapter, info, body=body, key_hash=key_hash, header_run=header_run, tight=tight)
    kept = _recorded(request, body, b"", None) if ctx.settings.store.record_bodies else None
    ctx.observer.unreadable(route.provider.value, "blocked" if ticket.answer is not None else action)
    if ticket.answer is not None:
        await ctx.settle(ctx.guard.complete(ticket, None, client_status=ticket.answer.status, body=kept))
        return _synthetic(ticket.answer, ticket)
    if action == "refuse":
        message = f"RunGuard cannot read this request's body ({problem}) and does not forward what it cannot read"
        reply = provider_error(route.dialect, 400, message, "unreadable_request")
        reply.headers["x-runguard-run-id"] = ticket.run_id
        await ctx.settle(ctx.guard.complete(ticket, None, client_status=reply.status, body=kept))
        return reply
    return await _forward(request, ctx, route, ticket, Outgoing(headers, body))


@frozen
class Outgoing:
    """What goes upstream, and how the client's copy of a stream is rewritten (opt-in only)."""

    headers: CIMultiDict[str]
    body: bytes
    rewrite: UsageChunkFilter | None = None


def _extra_headers(ctx: ProxyContext, ticket: Ticket) -> CIMultiDict[str]:
    extra = CIMultiDict({"x-runguard-run-id": ticket.run_id})
    warning = ticket.warning_header()
    if warning:
        extra["x-runguard-warning"] = warning
    return extra


async def _forward(
    request: web.Request, ctx: ProxyContext, route: Route, ticket: Ticket, sending: Outgoing
) -> web.StreamResponse:
    guard = ctx.guard
    record = ctx.settings.store.record_bodies
    sent = time.perf_counter()

    async def failed(exc: UpstreamError) -> web.Response:
        failure = ResponseInfo(error=str(exc), complete=False)
        reply = upstream_failed(route.dialect, exc)
        reply.headers["x-runguard-run-id"] = ticket.run_id
        seen = guard.response_seen(ticket, failure, None, time.perf_counter() - sent)
        kept = _recorded(request, sending.body, b"", None) if record else None
        await ctx.settle(guard.complete(ticket, seen, client_status=reply.status, error=type(exc).__name__, body=kept))
        return reply

    overhead.sending(request)
    try:
        upstream = await ctx.upstreams[route.provider].send(
            request.method, raw_target(route, request.raw_path), sending.headers, sending.body
        )
    except UpstreamError as exc:
        return await failed(exc)
    except asyncio.CancelledError:
        # The client left before the upstream answered: the upstream call is abandoned with it.
        ctx.spawn(guard.complete(ticket, None, client_status=None, error="client_disconnected"))
        raise
    async with upstream:
        overhead.answered(request)
        if is_stream(upstream, route.stream):
            return await _forward_stream(
                request, ctx, ticket, upstream, sent, sending.body if record else None, sending.rewrite
            )
        overhead.sending(request)
        try:
            raw = await read_whole(upstream)
        except UpstreamError as exc:
            return await failed(exc)
        except asyncio.CancelledError:
            ctx.spawn(guard.complete(ticket, None, client_status=None, error="client_disconnected"))
            raise
        overhead.answered(request)
        parsed = decode_body(raw, upstream.headers.get("Content-Encoding"), 1 << 30)
        info = ticket.adapter.parse_response(parsed) if parsed is not None else ResponseInfo(parse_error="encoding")
        seen = guard.response_seen(ticket, info, upstream.status, time.perf_counter() - sent)
        replacement = guard.inspect(ticket, seen)
        reply = (
            _synthetic(replacement, ticket)
            if replacement is not None
            else whole_response(upstream, raw, _extra_headers(ctx, ticket))
        )
        kept = _recorded(request, sending.body, raw, upstream.status) if record else None
        overhead.stamp(request, reply.headers)
        try:
            await reply.prepare(request)
            await reply.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            ctx.spawn(guard.complete(ticket, seen, client_status=None, error="client_disconnected", body=kept))
            raise
        await ctx.settle(guard.complete(ticket, seen, client_status=reply.status, body=kept))
        return reply


async def _forward_stream(
    request: web.Request,
    ctx: ProxyContext,
    ticket: Ticket,
    upstream: aiohttp.ClientResponse,
    sent: float,
    recorded_request: bytes | None,
    rewrite: UsageChunkFilter | None,
) -> web.StreamResponse:
    guard = ctx.guard
    parser = ticket.adapter.stream_parser()

    json_array = ticket.request.json_array_stream
    error_event = stream_error_element if json_array else ticket.adapter.stream_error_event

    finished = False

    async def finish(error: str | None, upstream_broke: bool, captured: bytes | None) -> None:
        info = parser.close()
        if upstream_broke and info.error is None:
            # A reset or silence mid-stream is an upstream failure (retry_cascade counts it).
            info = dataclasses.replace(info, error=error, complete=False)
        seen = guard.response_seen(ticket, info, upstream.status, time.perf_counter() - sent)
        kept = _recorded(request, recorded_request, captured or b"", upstream.status) if recorded_request else None
        await guard.complete(ticket, seen, client_status=upstream.status, error=error, body=kept)

    try:
        with ctx.shutdown.streaming(upstream.content):
            out, outcome = await relay_stream(
                request,
                upstream,
                parser,
                overhead.stamp(request, _extra_headers(ctx, ticket)),
                error_event,
                capture=recorded_request is not None,
                rewrite=rewrite,
                json_array=json_array,
            )
        finished = True
        captured = bytes(outcome.captured) if outcome.captured is not None else None
        upstream_broke = outcome.error is not None and outcome.error != "proxy_shutdown"
        await ctx.settle(finish(outcome.error, upstream_broke, captured))
        return out
    except (asyncio.CancelledError, ConnectionResetError):
        if not finished:
            # The client left: closing the upstream response (by leaving `async with`)
            # cancels the upstream request; record the partial usage seen so far.
            ctx.spawn(finish("client_disconnected", False, None))
        raise
