"""The provider-facing request handler: route, read the key, parse, then guard and forward.

Every blocking decision is made before the client response is prepared;
after that only an in-stream error event can end it. A model request goes
through the guard in a `Passage` (admitted or answered locally, forwarded
and read: `forward`, recorded once); requests the adapters do not model are
forwarded untouched and only counted (`untouched`), and a WebSocket
handshake is relayed as a socket (`websocket`).
"""

from __future__ import annotations

import asyncio
import functools
import logging

from aiohttp import web
from multidict import CIMultiDict

from runguard.config import Settings
from runguard.proxy.core.events import Provider, RequestInfo
from runguard.proxy.guard import costs_money, tightening_from, unreadable, with_note
from runguard.proxy.http import accounts
from runguard.proxy.http.forward import Outgoing, forward, synthetic
from runguard.proxy.http.recorded import credentials_of, recorded
from runguard.proxy.http.untouched import passthrough, poll, polled
from runguard.proxy.providers import compatible, credentials
from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.common import clients, sessions
from runguard.proxy.providers.framing import Framing
from runguard.proxy.providers.paths import REFUSED, canonical
from runguard.proxy.providers.registry import adapter_for, header_facts, usage_on_request
from runguard.proxy.providers.routes import Route, resolve
from runguard.proxy.relay import (
    CONTEXT,
    BodyTooLarge,
    ProxyContext,
    UsageChunkFilter,
    inflate,
    is_upgrade,
    provider_error,
    upstream_request_headers,
    with_usage_requested,
)
from runguard.proxy.sockets import websocket

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


def _key_refusal(ctx: ProxyContext, route: Route, key_hash: str) -> web.Response | None:
    allowed = ctx.settings.runs.key_allowlist
    if not allowed or key_hash in allowed:
        return None
    return provider_error(
        route.dialect, 403, f"RunGuard: API key {key_hash} is not on this proxy's allowlist", "key_not_allowed"
    )


def _credential_refusal(route: Route, credential: credentials.Credential) -> web.Response:
    places = ", ".join(credential.conflict)
    return provider_error(
        route.dialect,
        400,
        f"RunGuard: this request carries different API keys ({places}); send one key, in one place",
        "conflicting_credentials",
    )


async def _spending_refusal(ctx: ProxyContext, route: Route, key_hash: str) -> web.Response | None:
    """A request (or a socket) forwarded unread that would cost a stopped key money (`spending`): its refusal,
    as the provider's 429 that SDKs do not retry."""
    refused = await ctx.guard.spending.refusal(key_hash, route.model or "")
    if refused is None:
        return None
    detector, reason = refused
    headers = {"x-should-retry": "false", "x-runguard-trip": detector}
    return provider_error(route.dialect, 429, f"RunGuard: {reason}"[:1000], f"runguard_{detector}", headers)


async def _socket(
    request: web.Request, ctx: ProxyContext, route: Route, key_hash: str, headers: CIMultiDict[str]
) -> web.StreamResponse:
    """A WebSocket handshake, relayed (`websocket`). A socket relayed unread (a Gemini Live session) is judged by
    nothing inside it, so a stopped key is refused before it opens one, as for its other unread requests."""
    if not websocket.guarded(route):
        stopped = await _spending_refusal(ctx, route, key_hash)
        if stopped is not None:
            return stopped
    return await websocket.relay(request, ctx, route, key_hash, headers)


async def handle(request: web.Request) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    # What goes upstream is computed once, hop-by-hop headers (and those `Connection:` names) already out,
    # and the key is read from it: the key judged is the key sent (`credentials`).
    outgoing = upstream_request_headers(request.headers, ctx.own_headers)
    facts = credentials.claims(outgoing, request.query_string, request.query)  # a key that claims `/v1/...`
    marked = header_facts(request.headers)  # a header only one provider's clients send (anthropic-version)
    facts = facts | marked if marked else facts
    api_version = "api-version" in request.query_string
    path = canonical(request.raw_path)
    if path is None:  # a spelling servers read differently (`paths`): refused before routing
        route = resolve(request.path, api_version=api_version, facts=facts)
        return provider_error(route.dialect if route else None, 404, f"RunGuard: {REFUSED}", "unknown_path")
    upstream_name = compatible.named(path, ctx.settings.upstreams.compatible)  # `/<name>/v1/...`
    route = (
        compatible.route(upstream_name, path) if upstream_name else resolve(path, api_version=api_version, facts=facts)
    )
    if route is None:
        return provider_error(None, 404, f"RunGuard: no provider serves {path}", "unknown_path")
    if route.lookalike:  # served as a guarded endpoint by a front end that folds case or trims the path
        message = f"RunGuard: {path} is not spelt as the provider's endpoint is (case, a trailing space or dot)"
        return provider_error(route.dialect, 404, message, "unknown_path")
    upgrade = is_upgrade(request.method, request.headers)
    protocols = websocket.offered_protocols(request) if upgrade else ()
    hidden = credentials.after_semicolons(request.raw_path.partition("?")[2])
    if hidden:  # a credential some servers read and this proxy would not judge
        message = f"RunGuard: a credential follows a ';' in the query ({', '.join(hidden)}); separate it with '&'"
        return provider_error(route.dialect, 400, message, "conflicting_credentials")
    keyed = Provider.OPENAI if upstream_name else route.provider  # a compatible upstream reads keys as OpenAI does
    credential = credentials.read(keyed, outgoing, request.query, protocols)
    if credential.conflict:
        return _credential_refusal(route, credential)
    credentials.drop_unread(keyed, outgoing)
    key_hash = ctx.hasher.hash(credential.key)
    account = await accounts.claim(ctx, route, key_hash, credential.key is not None)
    if account is not None:
        key_hash = account.acting  # the project's identity once the token is proven for it, else the token's
    refusal = _key_refusal(ctx, route, account.identity if account is not None else key_hash)
    if refusal is not None:
        return refusal
    if upgrade:
        return await _socket(request, ctx, route, key_hash, outgoing)
    if ctx.stopping.is_set() and not request.content.is_eof():
        # The rest of this body would be dropped (see `stop_reading`): say so now, the SDK retries elsewhere.
        return provider_error(route.dialect, 503, "RunGuard is shutting down; retry the request", "shutting_down")
    adapter = adapter_for(route.api) if request.method == "POST" else None
    polls = polled(request, route) if adapter is None else None
    if adapter is None and polls is None:
        stopped = (
            await _spending_refusal(ctx, route, key_hash) if costs_money(request.method, route.upstream_path) else None
        )
        if stopped is not None:
            return stopped
        # Nothing here is read: the body streams upstream as it arrives, whatever its size (a file upload).
        return await passthrough(request, ctx, route, request.content if request.body_exists else b"", outgoing)
    task = asyncio.current_task()
    if task is not None:
        ctx.reading.add(task)
    try:
        body = await _read_body(request, ctx.settings.server.max_body_bytes)
    except BodyTooLarge as exc:
        return provider_error(route.dialect, 413, f"RunGuard: {exc}", "request_too_large")
    finally:
        ctx.reading.discard(task)
    if adapter is not None:
        framing = route.framing(request.query)  # how its answer streams: its adapter writes answers framed so
        return await _guarded(request, ctx, route, framing.framed(adapter), framing, body, key_hash, outgoing, account)
    if polls is not None:
        return await poll(request, ctx, route, polls, body, outgoing, key_hash)
    return await passthrough(request, ctx, route, body, outgoing)  # (ruled out above: each is one or the other)


async def _guarded(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    adapter: Adapter,
    framing: Framing,
    body: bytes,
    key_hash: str,
    headers: CIMultiDict[str],
    account: accounts.Claim | None = None,
) -> web.StreamResponse:
    """A model request: decoded and parsed, then in its `Passage` answered locally if stopped, else sent
    upstream (`forward`) as the client sent it (less a nudge's note or an opt-in usage request)."""
    settings = ctx.settings
    try:
        encoding = request.headers.get("Content-Encoding")
        decoded = body if encoding is None else await inflate(body, encoding, settings.server.max_body_bytes)
    except BodyTooLarge as exc:
        return provider_error(route.dialect, 413, f"RunGuard: {exc}", "request_too_large")
    header_run, agent = ctx.names(request.headers)
    body_read = decoded or b""
    slot = ctx.slot(key_hash, header_run, body_read)
    session = sessions.from_headers(request.headers) if header_run is None else None
    context = RequestContext(
        route.model, agent, route.stream, history=slot, session=session, client=clients.family_of(request.headers)
    )
    info = adapter.parse_request(body_read, context)
    tight = tightening_from(request.headers)
    refused = ctx.guard.policy.header_errors(tight) if tight else None
    if refused:
        message = f"RunGuard: invalid X-RunGuard-* header: {'; '.join(refused)}"
        return provider_error(route.dialect, 400, message[:1000], "invalid_runguard_header")
    if decoded is None or info.parse_error:
        problem = info.parse_error if decoded is not None else "the Content-Encoding cannot be decoded"
        return await _unreadable(request, ctx, route, adapter, framing, body, key_hash, problem or "unknown", headers)
    # Its upstream from the start (Gemini's OpenAI-compatible Chat: provider gemini, api chat; a compatible
    # service): a stop at admission is priced and recorded by where the request would have gone.
    passage = ctx.guard.passage(
        adapter, info, body=decoded, key_hash=key_hash, header_run=header_run, tight=tight, upstream=route.provider
    )
    async with passage:
        ticket = passage.ticket
        if tight:
            ticket.notes = ctx.guard.policy.ignored(key_hash, ticket.request.model, tight)
        ticket.credentials = functools.partial(credentials_of, request)  # read only if an upstream error needs it
        ticket.traceparent, ticket.tracestate = request.headers.get("traceparent"), request.headers.get("tracestate")
        if passage.answer is not None:
            # Recorded with no upstream answer (status None): a replay sees the request that was stopped.
            passage.body = recorded(request, decoded, b"", None) if settings.store.record_bodies else None
            return synthetic(passage.answer, ticket)
        # Only an upstream's answer proves (or disproves) a credential for an account, never a local one.
        sending = _outgoing(settings, info, body, decoded, ticket.note, headers, framing)
        return await forward(request, ctx, route, passage, sending, account.answered if account else None)


def _outgoing(
    settings: Settings,
    info: RequestInfo,
    body: bytes,
    decoded: bytes,
    note: str | None,
    headers: CIMultiDict[str],
    framing: Framing,
) -> Outgoing:
    """What goes upstream: the `body` as the client sent it (`decoded`: as read), unless a nudge's `note` is
    spliced into it or (opt-in) a Chat stream is asked for its usage."""
    noted = with_note(info.api, decoded, note) if note is not None else None
    if noted is not None:
        # A nudge: the note spliced into the body, sent as plain JSON (its length is the new body's).
        body = decoded = noted
        headers.popall("Content-Encoding", None)
    rewrite: UsageChunkFilter | None = None
    if settings.upstreams.inject_stream_usage and usage_on_request(info.api) and info.stream and not info.include_usage:
        asked = with_usage_requested(decoded)
        if asked is not None:
            # An opt-in change to the body (the other is a nudge): sent as plain JSON, read back as plain SSE.
            body, rewrite = asked, UsageChunkFilter()
            headers.popall("Content-Encoding", None)
            headers.popall("Accept-Encoding", None)
    return Outgoing(headers, body, rewrite, framing)


async def _unreadable(
    request: web.Request,
    ctx: ProxyContext,
    route: Route,
    adapter: Adapter,
    framing: Framing,
    body: bytes,
    key_hash: str,
    problem: str,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    """A model request whose body cannot be read: judged by what needs no body, recorded with its parse error,
    then forwarded untouched or refused with a 400 (`guard.unreadable`; see `unreadable`)."""
    action = ctx.settings.guard.unreadable
    ctx.observer.parse_error(str(route.api))
    info = unreadable.request_info(adapter.api, problem, body, model=route.model, stream=route.stream)
    header_run, _ = ctx.names(request.headers)
    tight = tightening_from(request.headers)
    async with ctx.guard.passage(
        adapter, info, body=body, key_hash=key_hash, header_run=header_run, tight=tight, upstream=route.provider
    ) as passage:
        kept = recorded(request, body, b"", None) if ctx.settings.store.record_bodies else None
        ctx.observer.unreadable(str(route.provider), "blocked" if passage.answer is not None else action)
        if passage.answer is not None:
            passage.body = kept
            return synthetic(passage.answer, passage.ticket)
        if action == "refuse":
            message = f"RunGuard cannot read this request's body ({problem}) and does not forward what it cannot read"
            reply = provider_error(route.dialect, 400, message, "unreadable_request")
            reply.headers["x-runguard-run-id"] = passage.ticket.run_id
            passage.client_status, passage.body = reply.status, kept
            return reply
        return await forward(request, ctx, route, passage, Outgoing(headers, body, framing=framing))
