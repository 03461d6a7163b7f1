"""Reading a Responses answer: a whole Response object (a body, a poll, `response.completed`'s) or its stream
of typed events, where `response.completed` carries the whole response with its usage.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from runguard.proxy.core.events import ResponseInfo, ToolCall, Usage
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.providers.common.jsonish import as_dict, as_int, as_list, as_str, opt_str, text_of
from runguard.proxy.providers.common.sse import SseObjects
from runguard.proxy.providers.openai_responses.calls import CALL_ITEMS, arguments_of, call_of

# Tools OpenAI runs itself and bills per call, by their output item: a web search that opens a page or
# finds in one is a step of a search, not another.
_BILLED_CALLS = {"web_search_call": "web_search", "file_search_call": "file_search"}
_TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})
# A Response object's `status` once it will change no more (a background response is polled until then).
FINAL_STATUSES = frozenset({"completed", "incomplete", "failed", "cancelled"})


def _usage(raw: Any, billed: dict[str, int], tier: Any) -> Usage | None:
    """A Response's usage; `billed`: its hosted calls by tool; `tier`: the service tier it names."""
    usage = as_dict(raw)
    if not usage:
        return None
    return Usage(
        input_tokens=as_int(usage.get("input_tokens")),
        output_tokens=as_int(usage.get("output_tokens")),
        cached_tokens=as_int(as_dict(usage.get("input_tokens_details")).get("cached_tokens")),
        reasoning_tokens=as_int(as_dict(usage.get("output_tokens_details")).get("reasoning_tokens")),
        tool_calls=tuple(billed.items()) if billed else (),
        service_tier=opt_str(tier),
    )


def _bill(billed: dict[str, int], item: dict[str, Any], kind: str) -> None:
    tool = _BILLED_CALLS[kind]
    if kind == "web_search_call" and as_dict(item.get("action")).get("type", "search") != "search":
        return
    billed[tool] = billed.get(tool, 0) + 1


def _error_text(data: dict[str, Any]) -> str | None:
    error = data.get("error")
    if isinstance(error, dict):
        return as_str(error.get("message")) or as_str(error.get("code")) or "error"
    if data.get("status") == "failed":
        return "response failed"
    return None


def response_info(data: dict[str, Any], *, complete: bool = True) -> ResponseInfo:
    """A whole Response object (a body, or the one `response.completed` carries)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    billed: dict[str, int] = {}
    for raw in as_list(data.get("output")):
        item = as_dict(raw)
        kind = as_str(item.get("type"))
        if kind == "message":
            texts.append(text_of(item.get("content")))
        elif kind in CALL_ITEMS:
            calls.append(call_of(item, len(calls)))
        elif kind in _BILLED_CALLS:
            _bill(billed, item, kind)
    status = data.get("status")
    return ResponseInfo(
        response_id=opt_str(data.get("id")),
        model=opt_str(data.get("model")),
        text="".join(texts),
        tool_calls=tuple(calls),
        handoffs=handoffs_of(calls),
        finish_reason=opt_str(status),
        usage=_usage(data.get("usage"), billed, data.get("service_tier")),
        error=_error_text(data),
        complete=complete,
    )


class ResponsesStreamParser(SseObjects):
    """Follows the typed events; the terminal event's full response wins when it comes."""

    def __init__(self) -> None:
        super().__init__()
        self._final: ResponseInfo | None = None
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._calls: dict[int, list[Any]] = {}  # output_index -> [call_id, name, argument pieces]
        self._error: str | None = None

    def take(self, payload: Any) -> None:
        """One event, parsed (a WebSocket frame carries one: see `ws_responses`)."""
        if not isinstance(payload, dict):
            return
        kind = payload.get("type")
        if not isinstance(kind, str):
            return
        if kind in _TERMINAL:
            self._final = response_info(as_dict(payload.get("response")), complete=kind != "response.failed")
        elif kind == "error":
            # An SSE error event names its problem at the top; a WebSocket error frame under `error`.
            nested = as_dict(payload.get("error"))
            found = payload.get("message") or payload.get("code") or nested.get("message") or nested.get("code")
            self._error = as_str(found) or "error"
        elif kind == "response.created":
            response = as_dict(payload.get("response"))
            self._id, self._model = opt_str(response.get("id")), opt_str(response.get("model"))
        elif kind == "response.output_text.delta":
            self._text.append(as_str(payload.get("delta")))
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = as_dict(payload.get("item"))
            if as_str(item.get("type")) in CALL_ITEMS:
                slot = self._calls.setdefault(as_int(payload.get("output_index")), [None, "", []])
                call = call_of(item, 0)
                slot[0], slot[1] = call.call_id or slot[0], call.name or slot[1]
                if kind.endswith(".done") and arguments_of(item) is not None:
                    slot[2] = [call.arguments]
        elif kind == "response.function_call_arguments.delta":
            slot = self._calls.setdefault(as_int(payload.get("output_index")), [None, "", []])
            slot[2].append(as_str(payload.get("delta")))

    def close(self) -> ResponseInfo:
        self.rest()
        problem = self.unparsable
        if self._final is not None:
            info = self._final
            if self._error and not info.error:
                info = dataclasses.replace(info, error=self._error)
            return dataclasses.replace(info, parse_error=problem) if problem else info
        calls = tuple(
            ToolCall(name, "".join(pieces), call_id, position)
            for position, (call_id, name, pieces) in enumerate(v for _, v in sorted(self._calls.items()))
        )
        return ResponseInfo(
            response_id=self._id,
            model=self._model,
            text="".join(self._text),
            tool_calls=calls,
            handoffs=handoffs_of(calls),
            error=self._error,
            complete=False,
            parse_error=problem,
        )
