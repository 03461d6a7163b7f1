"""The Responses API's WebSocket mode, as RunGuard reads it (no I/O): requests, their events, local answers.

The spec's `socket` (`providers.sockets.RequestMessages`, which this module satisfies).
A client sends `{"type": "response.create", ...}` with the fields of a
`POST /v1/responses` body, and the provider answers with the events a stream
would carry, one per message, ending with `response.completed` (or `failed`,
`incomplete`, or an `error` message). Requests on one `stream_id` lane are
answered in order; lanes run side by side. A request RunGuard stops is
answered on the socket (`messages_of`): an `error` message carrying its code,
or the events of a stop completion, on the request's lane.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers.answers import Synthetic
from runguard.proxy.providers.common.jsonish import as_int, opt_str
from runguard.proxy.providers.common.sse import SseSplitter
from runguard.proxy.providers.openai_responses.output import ResponsesStreamParser

ENDS = frozenset({"response.completed", "response.failed", "response.incomplete", "error", "response.error"})
_CREATE = '"response.create"'


@frozen
class SocketEvent:
    """A message of the socket, read: its payload and the lane (`stream_id`) it is on."""

    payload: dict[str, Any]
    lane: str | None

    @property
    def ending(self) -> int | None:
        """The status a terminal event ends its request with (its `status`, else 200 for a `response.*`
        event and 500 for an error); None for an event that ends nothing."""
        kind = self.payload.get("type")
        if kind not in ENDS:
            return None
        return as_int(self.payload.get("status")) or (200 if str(kind).startswith("response.") else 500)


def read(text: str) -> SocketEvent | None:
    """A message as an object with its lane; None for one that cannot be read as one."""
    try:
        payload = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if type(payload) is not dict:
        return None
    return SocketEvent(payload, opt_str(payload.get("stream_id")))


def create(text: str) -> SocketEvent | None:
    """A client's `response.create` message (read only if its text names one); None for any other."""
    if _CREATE not in text:
        return None
    event = read(text)
    return event if event is not None and event.payload.get("type") == "response.create" else None


def unreadable_create(text: str) -> bool:
    """A message that names `response.create` (the token, quotes included: inside a JSON string it would be
    escaped) but that orjson cannot read: a lone surrogate, nesting past its depth, no JSON at all."""
    if _CREATE not in text:
        return False
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return True
    return False


def parser() -> ResponsesStreamParser:
    """A reader of one request's events (`ResponsesStreamParser.take`)."""
    return ResponsesStreamParser()


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
