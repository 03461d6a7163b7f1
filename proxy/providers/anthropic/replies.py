"""Synthetic Anthropic Messages responses: the error the SDK will not retry, and stop messages.

The anthropic SDK (`_base_client.py`, `_should_retry`) obeys `x-should-retry`
before anything else, and otherwise retries 408, 409, 429 and 5xx; so a stop
is a 429 `rate_limit_error` in Anthropic's error shape
(`{"type":"error","error":{"type","message"},"request_id"}`, with a
`request-id` header as Anthropic sends one) and `x-should-retry: false`: the
SDK raises `RateLimitError` after one request. An `error` event in a stream
already under way (`_streaming.py`: `sse.event == "error"`) raises
`APIStatusError` with the event's body; nothing retries it.

A stop is a `message` with `stop_reason: "end_turn"`, streamed as the full
event sequence (`message_start`, `content_block_start`, `ping`,
`content_block_delta`, `content_block_stop`, `message_delta`,
`message_stop`): the SDK's `messages.stream()` accumulator needs each of them.
When the request forces one tool (`tool_choice` names it), the stop is a call
of that tool whose input is valid for its schema (`stop_reason: "tool_use"`):
a client that forced a tool reads only a call of it (pydantic-ai's output tool).
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.common.openai_replies import synthetic_id

JSON = {"Content-Type": "application/json"}
SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
# Anthropic's error types by status (its errors page); a status not listed is an `api_error`.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_object(status: int, message: str, request_id: str | None = None) -> dict[str, Any]:
    """Anthropic's error object for `status`."""
    error = {"type": ERROR_TYPES.get(status, "api_error"), "message": message}
    return {"type": "error", "error": error, "request_id": request_id}


def error_body(status: int, message: str, request_id: str | None = None) -> bytes:
    return orjson.dumps(error_object(status, message, request_id))


def error_response(notice: StopNotice, status: int = 429) -> Synthetic:
    request_id = synthetic_id("req_", notice)
    headers = {**JSON, "x-should-retry": "false", "request-id": request_id}
    return Synthetic(status, headers, error_body(status, notice.message, request_id))


def stream_error_event(message: str, code: str) -> bytes:
    """The `error` event that ends a stream under way (the SDK raises `APIStatusError` with its body)."""
    error = {"type": "overloaded_error" if code == "overloaded" else "api_error", "message": f"{message} ({code})"}
    return b"event: error\ndata: " + orjson.dumps({"type": "error", "error": error}) + b"\n\n"


def _usage() -> dict[str, Any]:
    return {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _message(ident: str, model: str, content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _usage(),
    }


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **payload}) + b"\n\n"


def stop_response(
    notice: StopNotice, model: str, text: str, *, stream: bool, forced_tool: str | None = None
) -> Synthetic:
    """A message that ends the turn with `text`; or, for a request that forces `forced_tool`, a call of it
    whose input is `text` (a JSON object valid for the tool's schema)."""
    ident = synthetic_id("msg_", notice)
    if forced_tool is None:
        block: dict[str, Any] = {"type": "text", "text": text}
        start: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": text}
        stop = "end_turn"
    else:
        call_id = synthetic_id("toolu_", notice)
        block = {"type": "tool_use", "id": call_id, "name": forced_tool, "input": orjson.loads(text)}
        start = {"type": "tool_use", "id": call_id, "name": forced_tool, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": text}
        stop = "tool_use"
    if not stream:
        return Synthetic(200, JSON, orjson.dumps(_message(ident, model, [block], stop)))
    events = [
        _event("message_start", {"message": _message(ident, model, [], None)}),
        _event("content_block_start", {"index": 0, "content_block": start}),
        _event("ping", {}),
        _event("content_block_delta", {"index": 0, "delta": delta}),
        _event("content_block_stop", {"index": 0}),
        _event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 0}}),
        _event("message_stop", {}),
    ]
    return Synthetic(200, SSE, b"".join(events))
