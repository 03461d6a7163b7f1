"""Synthetic OpenAI responses: the error the SDK will not retry, and stop completions.

Shapes are the ones wire-formats.md A.4, B.4 and C.5 checked against
openai-python 2.x/3.x with strict validation and openai-agents: a 429 with
`x-should-retry: false` raises `RateLimitError` after exactly one request;
a stop completion ends the agent's turn (`response.completed` is mandatory
on a Responses stream).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from runguard.proxy.core.events import digest
from runguard.proxy.providers.answers import StopNotice, Synthetic

JSON = {"Content-Type": "application/json"}
SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def error_code(detector: str) -> str:
    return f"runguard_{detector}"


def error_response(notice: StopNotice, status: int = 429) -> Synthetic:
    body = {
        "error": {
            "message": notice.message,
            "type": "runguard_stopped",
            "param": None,
            "code": error_code(notice.detector),
        }
    }
    headers = {**JSON, "x-should-retry": "false"}
    return Synthetic(status, headers, orjson.dumps(body))


def stream_error_event(message: str, code: str) -> bytes:
    """Chat: a `data:` payload with a top-level `error` makes the SDK raise `APIError`."""
    body = {"error": {"message": message, "type": "runguard_proxy_error", "param": None, "code": code}}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def synthetic_id(prefix: str, notice: StopNotice) -> str:
    return f"{prefix}runguard{digest(f'{notice.run_id}:{notice.detector}:{time.time_ns()}', 6)}"


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def chat_stop(notice: StopNotice, model: str, text: str, *, stream: bool, include_usage: bool) -> Synthetic:
    ident, created = synthetic_id("chatcmpl-", notice), int(time.time())
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    if not stream:
        body = {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }
        return Synthetic(200, JSON, orjson.dumps(body))
    base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
    delta = {"role": "assistant", "content": text}
    chunks = [
        _sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}),
        _sse({**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]}),
    ]
    if include_usage:
        chunks.append(_sse({**base, "choices": [], "usage": usage}))
    chunks.append(b"data: [DONE]\n\n")
    return Synthetic(200, SSE, b"".join(chunks))


def _response_object(ident: str, model: str, message: dict[str, Any], *, done: bool) -> dict[str, Any]:
    usage = {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    return {
        "id": ident,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed" if done else "in_progress",
        "model": model,
        "output": [message] if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage if done else None,
    }


def responses_stop(notice: StopNotice, model: str, text: str, *, stream: bool) -> Synthetic:
    ident, item_id = synthetic_id("resp_", notice), synthetic_id("msg_", notice)
    part = {"type": "output_text", "text": text, "annotations": []}
    message = {"type": "message", "id": item_id, "status": "completed", "role": "assistant", "content": [part]}
    done = _response_object(ident, model, message, done=True)
    if not stream:
        return Synthetic(200, JSON, orjson.dumps(done))
    at = {"item_id": item_id, "output_index": 0, "content_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response_object(ident, model, message, done=False)},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        {"type": "response.output_text.delta", **at, "delta": text, "logprobs": []},
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.completed", "response": done},
    ]
    body = b"".join(
        b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps({**event, "sequence_number": seq}) + b"\n\n"
        for seq, event in enumerate(events)
    )
    return Synthetic(200, SSE, body)


def responses_stream_error(message: str, code: str) -> bytes:
    """Responses: an `error` event that also carries a top-level `error` object.

    The `type`/`code`/`message`/`param` fields are the `ResponseErrorEvent`
    shape; the `error` object makes openai-python's stream raise `APIError`
    with the message (`_streaming.py`: a data payload with a top-level
    `error`), in a plain loop, in `responses.stream()` and in openai-agents,
    instead of a quiet end after an event a plain loop would skip (and, in
    openai-agents, a generic ModelBehaviorError).
    """
    error = {"type": "runguard_proxy_error", "code": code, "message": message, "param": None}
    event = {"type": "error", "sequence_number": 0, "code": code, "message": message, "param": None, "error": error}
    return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"
