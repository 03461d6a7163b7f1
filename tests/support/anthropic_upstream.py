"""A fake Anthropic Messages API for `FakeUpstream`: messages and their SSE streams, as Anthropic sends them.

`claude(plan)` is a script that plays a Claude model through a tool loop: each
`/v1/messages` request gets the plan's next step (tool calls, or a final
text), streamed when the request asks; `/v1/messages/count_tokens` and
`/v1/models` answer as Anthropic does. Every reply carries `request-id`, and
usage may carry prompt-cache reads and writes, so budgets can be checked.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.support.upstream import Received, Reply, Script

MODEL = "claude-haiku-4-5-20251001"


@dataclass(frozen=True)
class Cache:
    """Prompt-cache usage of one answer (tokens): read, written for 5 minutes, written for an hour."""

    read: int = 0
    write_5m: int = 0
    write_1h: int = 0


@dataclass(frozen=True)
class Step:
    """One answer: tool calls as (name, input), or else `text`; usage as (input, output) and cache."""

    calls: Sequence[tuple[str, dict[str, Any]]] = ()
    text: str = "Done."
    usage: tuple[int, int] = (20, 10)
    cache: Cache = field(default_factory=Cache)
    searches: int = 0  # server-side web searches the answer ran (billed per call)


def usage(step: Step) -> dict[str, Any]:
    cache = step.cache
    found: dict[str, Any] = {
        "input_tokens": step.usage[0],
        "cache_creation_input_tokens": cache.write_5m + cache.write_1h,
        "cache_read_input_tokens": cache.read,
        "cache_creation": {"ephemeral_5m_input_tokens": cache.write_5m, "ephemeral_1h_input_tokens": cache.write_1h},
        "output_tokens": step.usage[1],
        "service_tier": "standard",
    }
    if step.searches:
        found["server_tool_use"] = {"web_search_requests": step.searches, "web_fetch_requests": 0}
    return found


def blocks(step: Step, ids: Callable[[], str]) -> list[dict[str, Any]]:
    if not step.calls:
        return [{"type": "text", "text": step.text}]
    return [{"type": "tool_use", "id": ids(), "name": name, "input": args} for name, args in step.calls]


def message(
    step: Step, ident: str = "msg_fake", model: str = MODEL, ids: Callable[[], str] | None = None
) -> dict[str, Any]:
    content = blocks(step, ids or _ids(ident))
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if step.calls else "end_turn",
        "stop_sequence": None,
        "usage": usage(step),
    }


def _event(kind: str, **payload: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **payload}) + b"\n\n"


def message_stream(step: Step, ident: str = "msg_fake", model: str = MODEL) -> list[bytes]:
    """The events of `message(step)`: text in two deltas, each call's arguments in two `input_json_delta`s."""
    whole = message(step, ident, model)
    start_usage = {**whole["usage"], "output_tokens": 1}
    start_usage.pop("server_tool_use", None)
    events = [_event("message_start", message={**whole, "content": [], "stop_reason": None, "usage": start_usage})]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            text = block["text"]
            events.append(_event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
            events += [
                _event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
                for piece in (text[: len(text) // 2], text[len(text) // 2 :])
            ]
        else:
            events.append(_event("content_block_start", index=index, content_block={**block, "input": {}}))
            args = orjson.dumps(block["input"]).decode()
            events += [
                _event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
                for piece in (args[: len(args) // 2], args[len(args) // 2 :])
            ]
        events.append(_event("content_block_stop", index=index))
        if index == 0:
            events.append(_event("ping"))
    delta_usage = {"output_tokens": whole["usage"]["output_tokens"]}
    if step.searches:
        delta_usage["server_tool_use"] = whole["usage"]["server_tool_use"]
    events.append(
        _event("message_delta", delta={"stop_reason": whole["stop_reason"], "stop_sequence": None}, usage=delta_usage)
    )
    events.append(_event("message_stop"))
    return events


def _ids(prefix: str) -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"toolu_{prefix[-6:]}{next(counter)}"


HEADERS = {"request-id": "req_fake", "anthropic-organization-id": "org-fake"}


def reply_for(received: Received, step: Step, ident: str) -> Reply:
    """`step` answered the way `received` asked: a stream if its body says `stream: true`."""
    body = received.json() if received.body else {}
    model = body.get("model") or MODEL
    if body.get("stream") is True:
        return Reply(
            200, b"", {"Content-Type": "text/event-stream", **HEADERS}, chunks=message_stream(step, ident, model)
        )
    return Reply.json(message(step, ident, model), headers=HEADERS)


def claude(plan: Sequence[Step] | Callable[[int], Step], *, then: Step | None = None) -> Script:
    """A script that answers the n-th `/v1/messages` request with `plan[n]` (or `plan(n)`), and `then` (a final
    text by default) past its end; other Messages API paths answered as Anthropic does."""
    counter = itertools.count()

    def script(received: Received) -> Reply:
        path = received.path.removeprefix("/anthropic")
        if path == "/v1/messages/count_tokens":
            return Reply.json({"input_tokens": 42}, headers=HEADERS)
        if path.startswith("/v1/models"):
            model = {
                "type": "model",
                "id": MODEL,
                "display_name": "Claude Haiku 4.5",
                "created_at": "2025-10-01T00:00:00Z",
            }
            return Reply.json(
                {"data": [model], "has_more": False, "first_id": MODEL, "last_id": MODEL}, headers=HEADERS
            )
        if path != "/v1/messages":
            return not_found(path)
        n = next(counter)
        step = plan(n) if callable(plan) else plan[n] if n < len(plan) else then or Step()
        return reply_for(received, step, f"msg_fake{n:04d}")

    return script


def not_found(path: str) -> Reply:
    error = {"type": "not_found_error", "message": f"Not found: {path}"}
    return Reply.json({"type": "error", "error": error, "request_id": "req_fake"}, status=404, headers=HEADERS)
