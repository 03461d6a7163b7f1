"""Anthropic Messages responses: a whole `message` body, or its SSE stream, read into a `ResponseInfo`.

A stream is `event: <type>` + `data: <json>` pairs: `message_start` (the
message with empty content and the input usage), per block
`content_block_start` / `content_block_delta` (`text_delta`,
`input_json_delta` pieces of a tool call's arguments, `thinking_delta`,
`signature_delta`, `citations_delta`) / `content_block_stop`, then
`message_delta` (`stop_reason`, cumulative usage), `message_stop`; `ping`
anywhere; `error` ends it (`{"type":"error","error":{"type","message"}}`).

Usage: `input_tokens` leaves out the cached prompt, so the input here is
`input_tokens + cache_creation_input_tokens + cache_read_input_tokens` (what
Anthropic calls the total input), with the cache reads and writes (5-minute
and 1-hour, from `cache_creation`) named apart for their rates. Server tool
calls (`server_tool_use.web_search_requests`) are billed per call.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import ResponseInfo, ToolCall, Usage
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.providers.common.jsonish import as_dict, as_int, as_list, as_str, dumps_text, opt_str
from runguard.proxy.providers.common.sse import SseObjects

_BILLED = {"web_search_requests": "web_search"}  # server tool calls priced per call (`tools:` in pricing)


def usage_of(raw: Any) -> Usage | None:
    """A message's `usage` (or a stream's, merged from its events)."""
    usage = as_dict(raw)
    if not usage:
        return None
    read = as_int(usage.get("cache_read_input_tokens"))
    creation = as_dict(usage.get("cache_creation"))
    hour = as_int(creation.get("ephemeral_1h_input_tokens"))
    written = max(
        as_int(usage.get("cache_creation_input_tokens")), hour + as_int(creation.get("ephemeral_5m_input_tokens"))
    )
    server = as_dict(usage.get("server_tool_use"))
    billed = tuple((tool, as_int(server.get(key))) for key, tool in _BILLED.items() if as_int(server.get(key)) > 0)
    return Usage(
        input_tokens=as_int(usage.get("input_tokens")) + read + written,
        output_tokens=as_int(usage.get("output_tokens")),
        cached_tokens=read,
        reasoning_tokens=as_int(as_dict(usage.get("output_tokens_details")).get("thinking_tokens")),
        tool_calls=billed,
        cache_write_tokens=written - hour,
        cache_write_1h_tokens=hour,
    )


def error_text(data: dict[str, Any]) -> str | None:
    """The message of an error body or `error` event (`{"type":"error","error":{"type","message"}}`)."""
    error = data.get("error")
    if not error:
        return None
    found = as_dict(error)
    return as_str(found.get("message")) or as_str(found.get("type")) or dumps_text(error)[:200]


def arguments(pieces: list[str], start: Any) -> str:
    """A streamed call's arguments: its `input_json_delta` pieces, or the `input` it started with when it
    sent none; compact JSON, as a whole body's `input` is dumped (so the two read alike)."""
    if not pieces:
        return dumps_text(start if start is not None else {})
    joined = "".join(pieces)
    try:
        return dumps_text(orjson.loads(joined))
    except orjson.JSONDecodeError:
        return joined  # cut short: the text as it came


def message_info(data: dict[str, Any], *, complete: bool = True) -> ResponseInfo:
    """A whole `message` body (or an error body)."""
    if data.get("type") == "error" or (data.get("error") and "content" not in data):
        return ResponseInfo(error=error_text(data), complete=complete)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in as_list(data.get("content")):
        part = as_dict(block)
        kind = part.get("type")
        if kind == "text":
            texts.append(as_str(part.get("text")))
        elif kind == "tool_use":
            raw = part.get("input")
            args = dumps_text(raw if raw is not None else {})
            calls.append(ToolCall(as_str(part.get("name")), args, opt_str(part.get("id")), len(calls)))
    found = tuple(calls)
    return ResponseInfo(
        response_id=opt_str(data.get("id")),
        model=opt_str(data.get("model")),
        text="".join(texts),
        tool_calls=found,
        handoffs=handoffs_of(found),
        finish_reason=opt_str(data.get("stop_reason")),
        usage=usage_of(data.get("usage")),
        complete=complete,
    )


class _Block:
    """One content block of a stream: its kind, a call's id, name and starting `input`, and the pieces its
    deltas sent (text, or a call's argument JSON)."""

    __slots__ = ("call_id", "kind", "name", "pieces", "start")

    def __init__(self, kind: Any, call_id: str | None = None, name: str = "", start: Any = None) -> None:
        self.kind, self.call_id, self.name, self.start = kind, call_id, name, start
        self.pieces: list[str] = []


class MessagesStreamParser(SseObjects):
    """Accumulates a Messages stream: text and tool calls by block index, stop reason, usage."""

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, _Block] = {}
        self._id: str | None = None
        self._model: str | None = None
        self._stop: str | None = None
        self._usage: dict[str, Any] = {}
        self._error: str | None = None
        self._done = False  # `message_stop` came

    def take(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "content_block_delta":
            self._delta(as_int(payload.get("index")), as_dict(payload.get("delta")))
        elif kind == "content_block_start":
            raw = as_dict(payload.get("content_block"))
            block = _Block(raw.get("type"), opt_str(raw.get("id")), as_str(raw.get("name")), raw.get("input"))
            if block.kind == "text" and as_str(raw.get("text")):
                block.pieces.append(raw["text"])
            self._blocks[as_int(payload.get("index"))] = block
        elif kind == "message_start":
            message = as_dict(payload.get("message"))
            self._id, self._model = opt_str(message.get("id")), opt_str(message.get("model"))
            self._usage.update(as_dict(message.get("usage")))
        elif kind == "message_delta":
            self._stop = opt_str(as_dict(payload.get("delta")).get("stop_reason")) or self._stop
            self._usage.update({k: v for k, v in as_dict(payload.get("usage")).items() if v is not None})
        elif kind == "message_stop":
            self._done = True
        elif kind == "error" or payload.get("error"):
            self._error = error_text(payload)

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.get(index)
        if block is None:  # a delta for a block that never started: taken as the kind it says
            block = self._blocks[index] = _Block("tool_use" if delta.get("type") == "input_json_delta" else "text")
        if delta.get("type") == "text_delta" and block.kind == "text":
            block.pieces.append(as_str(delta.get("text")))
        elif delta.get("type") == "input_json_delta" and block.kind == "tool_use":
            block.pieces.append(as_str(delta.get("partial_json")))

    def close(self) -> ResponseInfo:
        self.rest()
        texts: list[str] = []
        calls: list[ToolCall] = []
        for _, block in sorted(self._blocks.items()):
            if block.kind == "text":
                texts.append("".join(block.pieces))
            elif block.kind == "tool_use":
                calls.append(ToolCall(block.name, arguments(block.pieces, block.start), block.call_id, len(calls)))
        found = tuple(calls)
        return ResponseInfo(
            response_id=self._id,
            model=self._model,
            text="".join(texts),
            tool_calls=found,
            handoffs=handoffs_of(found),
            finish_reason=self._stop,
            usage=usage_of(self._usage),
            error=self._error,
            complete=self._done or (self._stop is not None and self._error is None),
            parse_error=self.unparsable,
        )
