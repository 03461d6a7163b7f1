"""Moving an upstream response to the client: whole, or chunk by chunk.

A stream is written to the client as each chunk arrives (never buffered) and
a decoded copy is fed to the adapter's parser, in batches (`ParseBatch`). If
the upstream breaks off mid-stream, or the proxy's shutdown cuts the stream
at the end of its grace period (`shutdown.StreamCut`), the client stream ends
with the provider's own error event: one more SSE event, or one more unit of the
stream's own framing (`providers.framing`: Gemini's JSON-array element).

Before the bytes that end a stream go out (its last chunk, or one carrying a
terminal event: `[DONE]`, `response.completed`, `message_stop`, ...), a
`before_end` hook is awaited once: the guard marks the stream's end pending
for every process there (`guard.ending`), so that a follow-up the client
sends the moment it has those bytes waits for the stream's verdict.

Writes are coalesced where that delays no body bytes: the response headers
leave with the first chunk (or, if that chunk is slow to come, alone after
`HEADERS_HOLD`, the most they are ever held), and a chunk that ends the
upstream body leaves with the end of the client's body. Each write is a
system call and, on the client's side, a wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from multidict import CIMultiDict

from runguard.proxy.providers.base import StreamParser
from runguard.proxy.providers.framing import SSE, Framing, Held
from runguard.proxy.relay.codec import Decoder, stream_decoder
from runguard.proxy.relay.headers import client_response_headers
from runguard.proxy.relay.shutdown import StreamCut

PARSE_BATCH = 64 * 1024  # bytes of a stream relayed before its parser reads them (at the latest: at its end)
HEADERS_HOLD = 0.005  # seconds a stream's headers wait for its first chunk to leave with it


def is_stream(response: aiohttp.ClientResponse, streamed_method: bool) -> bool:
    """SSE, or Gemini's streamGenerateContent without alt=sse (a JSON array sent in pieces)."""
    return response.content_type == "text/event-stream" or (streamed_method and response.status == 200)


ErrorEvent = Callable[[str, str], bytes]  # (message, code) -> the provider's error, as the stream carries it
BeforeEnd = Callable[[], Awaitable[None]]
# What ends a stream as its clients read it (OpenAI Chat, Responses, Anthropic): an SDK stops reading there.
_TERMINAL = (b"[DONE]", b"response.completed", b"response.failed", b"response.incomplete", b"message_stop")
_TAIL = 32  # bytes of the chunk before kept to find a terminal event split across two chunks


class ChunkFilter(Protocol):
    """Rewrites what the client sees of a stream (the parser still gets the upstream bytes)."""

    def feed(self, chunk: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


@dataclass(slots=True)
class StreamOutcome:
    """How a relayed stream ended."""

    error: str | None = None  # "upstream_reset", "upstream_idle_timeout", "proxy_shutdown"
    captured: bytearray | None = field(default=None, repr=False)


def whole_response(response: aiohttp.ClientResponse, body: bytes, extra: CIMultiDict[str]) -> web.Response:
    headers = client_response_headers(response.headers, keep_length=False)
    headers.extend(extra)
    return web.Response(status=response.status, reason=response.reason, headers=headers, body=body)


async def relay_stream(
    request: web.Request,
    response: aiohttp.ClientResponse,
    parser: StreamParser | None,
    extra: CIMultiDict[str],
    error_event: ErrorEvent | None,
    capture: bool = False,
    rewrite: ChunkFilter | None = None,
    framing: Framing = SSE,
    before_end: BeforeEnd | None = None,
) -> tuple[web.StreamResponse, StreamOutcome]:
    """Relay chunks as they arrive; feed the parser a decoded copy.

    Only reading upstream is guarded here: a failed write means the client
    left, and that propagates to the caller. For a plain SSE stream that can
    end in an error event, the bytes of an unfinished event wait for its
    blank line, so an error event never lands inside a half-sent one; a
    stream of another `framing` (Gemini's JSON array) holds back its own
    unfinished unit, so the error can follow as one more.
    """
    headers = client_response_headers(response.headers, keep_length=False)
    headers.extend(extra)
    out = _Relayed(status=response.status, reason=response.reason, headers=headers)
    writer = await out.prepare(request)
    hold = asyncio.get_running_loop().call_later(HEADERS_HOLD, _send_headers, writer)
    try:
        ending = _Ending(before_end) if before_end is not None else None
        return out, await _relay_body(out, response, parser, error_event, capture, rewrite, framing, ending)
    finally:
        hold.cancel()


async def _relay_body(
    out: web.StreamResponse,
    response: aiohttp.ClientResponse,
    parser: StreamParser | None,
    error_event: ErrorEvent | None,
    capture: bool,
    rewrite: ChunkFilter | None,
    framing: Framing,
    ending: _Ending | None,
) -> StreamOutcome:
    encoding = response.headers.get("Content-Encoding")
    parsing = ParseBatch(parser, stream_decoder(encoding)) if parser is not None else None
    plain = (encoding or "identity").strip().lower() == "identity"
    sse = response.content_type == "text/event-stream"
    events = framing.hold(sse, error_event is not None and plain)
    outcome = StreamOutcome(captured=bytearray() if capture else None)
    try:
        return await _relay_chunks(out, response, parsing, events, outcome, error_event, rewrite, ending)
    finally:  # the client left, the upstream broke off, or the stream ended: the parser reads what is held
        if parsing is not None:
            parsing.flush()


async def _relay_chunks(
    out: web.StreamResponse,
    response: aiohttp.ClientResponse,
    parsing: ParseBatch | None,
    events: Held,
    outcome: StreamOutcome,
    error_event: ErrorEvent | None,
    rewrite: ChunkFilter | None,
    ending: _Ending | None,
) -> StreamOutcome:
    content = response.content
    while True:
        try:
            chunk = await content.readany()
        except TimeoutError:
            outcome.error = "upstream_idle_timeout"
            message = "upstream stream went silent past the idle timeout"
            break
        except (aiohttp.ClientError, OSError) as exc:
            outcome.error = "upstream_reset"
            message = f"upstream connection broke off mid-stream: {type(exc).__name__}"
            break
        except StreamCut:
            outcome.error = "proxy_shutdown"
            message = "RunGuard proxy is shutting down: the stream was cut at the end of its grace period"
            break
        if not chunk:
            break
        if outcome.captured is not None:
            outcome.captured += chunk
        sending = events.take(chunk)
        if rewrite is not None:
            sending = rewrite.feed(sending)
        ended = content.at_eof()  # the upstream body ended with this chunk: it leaves with the client's end
        try:
            if ending is not None:
                await ending.before(sending, ended)
            if ended:
                await out.write_eof(sending + _rest(events, rewrite))
                return outcome
            if sending:
                await out.write(sending)
        finally:  # parsed after the write, so parsing never delays the client's bytes (and also if it failed)
            if parsing is not None:
                parsing.add(chunk)
    if ending is not None:
        await ending.before(b"", True)
    if outcome.error is not None:
        code = "proxy_shutdown" if outcome.error == "proxy_shutdown" else "upstream_error"
        await _end_with_error(out, events, error_event, message, code)  # an unfinished event is dropped
        return outcome
    await out.write_eof(_rest(events, rewrite))
    return outcome


class _Ending:
    """Awaits `before_end` once, before the bytes that end the stream for its client are written."""

    __slots__ = ("_hook", "_tail")

    def __init__(self, hook: BeforeEnd) -> None:
        self._hook: BeforeEnd | None = hook
        self._tail = b""

    async def before(self, sending: bytes, ended: bool) -> None:
        hook = self._hook
        if hook is None:
            return
        if not ended:
            seen = self._tail + sending
            self._tail = seen[-_TAIL:]
            if not any(marker in seen for marker in _TERMINAL):
                return
        self._hook = None
        await hook()


class ParseBatch:
    """A stream's chunks, handed to its parser `PARSE_BATCH` bytes at a time, and what is left at its end.

    Nothing reads the parser before the stream ends, so the chunks need not be
    parsed as they pass. A model streams small events a millisecond or more
    apart, and the process takes each one up with cold caches: on the bench's
    "tokens" stream (~250 deltas 1 ms apart) parsing every event as it passed
    cost about 40 us of CPU per event more than parsing them in batches
    (1.47x -> 1.14x of the pass-through's CPU). The batch bounds what is held
    per stream.
    """

    __slots__ = ("_decode", "_held", "_parser", "_size")

    def __init__(self, parser: StreamParser, decode: Decoder | None) -> None:
        self._parser = parser
        self._decode = decode
        self._held: list[bytes] = []
        self._size = 0

    def add(self, chunk: bytes) -> None:
        self._held.append(chunk)
        self._size += len(chunk)
        if self._size >= PARSE_BATCH:
            self.flush()

    def flush(self) -> None:
        """Feed the parser everything held, in order, as one chunk."""
        held = self._held
        if not held:
            return
        data = held[0] if len(held) == 1 else b"".join(held)
        held.clear()
        self._size = 0
        self._parser.feed(self._decode(data) if self._decode is not None else data)


def _rest(events: Held, rewrite: ChunkFilter | None) -> bytes:
    """What is still held back when the upstream body has ended."""
    if rewrite is None:
        return events.pending
    return rewrite.feed(events.pending) + rewrite.flush()


class _Relayed(web.StreamResponse):
    """A stream response whose headers wait in the writer for the first chunk (aiohttp >= 3.12).

    `web.Response` does the same for a whole body; on older aiohttp the
    attribute is unknown and the headers leave at `prepare()`, as before.
    """

    _send_headers_immediately = False


def _send_headers(writer: AbstractStreamWriter | None) -> None:
    """The first chunk is late: let the client have the status and headers now."""
    if writer is not None:
        with contextlib.suppress(ConnectionError):  # the client left; the relay sees it on its next write
            writer.send_headers()


async def _end_with_error(
    out: web.StreamResponse, events: Held, error_event: ErrorEvent | None, message: str, code: str
) -> None:
    ending = events.ending(error_event(message, code)) if error_event is not None else b""
    await out.write_eof(ending)
