"""The Responses API over a WebSocket: each `response.create` message is a request of its run.

A client sends `{"type": "response.create", ...}` with the fields of a
`POST /v1/responses` body, and the provider answers with the events a stream
would carry, one per message, ending with `response.completed` (or `failed`,
`incomplete`, or an `error` message). Requests on one `stream_id` lane are
answered in order; lanes run side by side.

So each `response.create` is admitted as a streamed Responses request with the
handshake's `X-Run-Id`, agent and limit headers. A stopped one is answered on
the socket (an `error` message carrying RunGuard's code, or the events of a
stop completion) and never sent upstream. The events of an admitted one are
read on their way to the client, and its terminal event accounts for it as the
end of a stream does. Other client messages (`response.steer`, ...) pass
untouched; a message that cannot be read passes too (fail open).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import orjson

from runguard.proxy.guard.policy import Tightening
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.providers.base import RequestContext, Synthetic
from runguard.proxy.providers.common.jsonish import as_int, opt_str
from runguard.proxy.providers.common.sse import SseSplitter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter, ResponsesStreamParser

if TYPE_CHECKING:
    from runguard.proxy.relay.context import ProxyContext

_ENDS = frozenset({"response.completed", "response.failed", "response.incomplete", "error", "response.error"})
_CREATE = '"response.create"'


@dataclasses.dataclass
class _InFlight:
    ticket: Ticket
    parser: ResponsesStreamParser
    sent: float  # perf_counter when it went upstream


class ResponsesSocket:
    """The requests of one client's Responses WebSocket, lane by lane."""

    def __init__(
        self, ctx: ProxyContext, key_hash: str, *, header_run: str | None, agent: str | None, tight: Tightening
    ) -> None:
        self._ctx = ctx
        self._key_hash = key_hash
        self._header_run = header_run
        self._agent = agent
        self._tight = tight
        self._adapter = ResponsesAdapter()
        self._lanes: dict[str | None, deque[_InFlight]] = {}

    async def from_client(self, text: str) -> list[str] | None:
        """None to send `text` upstream; else the messages that answer it here (nothing goes upstream)."""
        if _CREATE not in text:
            return None
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if type(payload) is not dict or payload.get("type") != "response.create":
            return None
        ctx, body = self._ctx, text.encode()
        slot = ctx.slot(self._key_hash, self._header_run, body)
        info = self._adapter.parse_request(body, RequestContext(None, self._agent, True, history=slot))
        if info.parse_error:
            ctx.observer.parse_error("responses")
            return None
        if not info.stream:  # a socket always streams; the SDK leaves `stream` out
            info = dataclasses.replace(info, stream=True)
        ticket = await ctx.guard.admit(
            self._adapter, info, body=body, key_hash=self._key_hash, header_run=self._header_run, tight=self._tight
        )
        lane = opt_str(payload.get("stream_id"))
        if ticket.answer is not None:
            await ctx.settle(ctx.guard.complete(ticket, None, client_status=ticket.answer.status))
            return messages_of(ticket.answer, lane)
        self._lanes.setdefault(lane, deque()).append(
            _InFlight(ticket, self._adapter.stream_parser(), time.perf_counter())
        )
        return None

    async def before_client(self, text: str) -> str | None:
        """Events are read once the client has them (`after_client`): nothing is held back."""
        return None

    async def after_client(self, text: str) -> None:
        """Read an event the client has been sent; a lane's terminal event accounts for its request."""
        if not self._lanes:
            return
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        if type(payload) is not dict:
            return
        lane = opt_str(payload.get("stream_id"))
        waiting = self._lanes.get(lane)
        if not waiting:
            return
        head = waiting[0]
        head.parser.take(payload)
        kind = payload.get("type")
        if kind not in _ENDS:
            return
        waiting.popleft()
        if not waiting:
            del self._lanes[lane]
        status = as_int(payload.get("status")) or (200 if kind.startswith("response.") else 500)
        await self._ctx.settle(self._finish(head, status, None))

    async def close(self, reason: str) -> None:
        """The socket closed: account for the requests still waiting on their answer, as cut off."""
        lanes, self._lanes = self._lanes, {}
        for waiting in lanes.values():
            for cut in waiting:
                await self._finish(cut, None, reason)

    async def _finish(self, done: _InFlight, status: int | None, error: str | None) -> None:
        guard = self._ctx.guard
        info = done.parser.close()
        if error is not None:
            info = dataclasses.replace(info, error=info.error or error, complete=False)
        seen = guard.response_seen(done.ticket, info, status, time.perf_counter() - done.sent)
        await guard.complete(done.ticket, seen, client_status=status, error=error)


def messages_of(answer: Synthetic, lane: str | None) -> list[str]:
    """A synthetic answer as socket messages: an `error` message for an error, the stream's events for a
    stop completion; each on the request's lane."""
    more: dict[str, Any] = {"stream_id": lane} if lane is not None else {}
    if answer.status != 200:
        body = orjson.loads(answer.body)
        return [orjson.dumps({"type": "error", **body, "status": answer.status, **more}).decode()]
    splitter = SseSplitter()
    events = [*splitter.feed(answer.body), *splitter.rest()]
    return [orjson.dumps({**orjson.loads(event.data), **more}).decode() for event in events]
