"""Reading a Gemini answer: a whole response, or its stream: SSE chunks (`alt=sse`) or, without it, one
JSON array sent in pieces. Chunks are deltas; `usageMetadata` is cumulative, so the last one counts.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import ResponseInfo, ToolCall, Usage
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.providers.common.jsonish import JsonArrayItems, as_dict, as_int, as_str, opt_str
from runguard.proxy.providers.common.sse import SseSplitter
from runguard.proxy.providers.gemini.contents import calls_of, parts_of


def _usage(raw: Any) -> Usage | None:
    usage = as_dict(raw)
    if not usage:
        return None
    thoughts = as_int(usage.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=as_int(usage.get("promptTokenCount")) + as_int(usage.get("toolUsePromptTokenCount")),
        output_tokens=as_int(usage.get("candidatesTokenCount")) + thoughts,
        cached_tokens=as_int(usage.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
        audio_input_tokens=_audio(usage.get("promptTokensDetails")),
        audio_output_tokens=_audio(usage.get("candidatesTokensDetails")),
        cached_audio_tokens=_audio(usage.get("cacheTokensDetails")),
    )


def _audio(details: Any) -> int:
    """The audio tokens of a usage breakdown by modality (`[{"modality": "AUDIO", "tokenCount": N}, ...]`)."""
    if type(details) is not list:
        return 0
    return sum(
        as_int(part.get("tokenCount")) for part in details if type(part) is dict and part.get("modality") == "AUDIO"
    )


def _error(data: dict[str, Any]) -> str | None:
    error = data.get("error")
    if not error:
        return None
    error = as_dict(error)
    return as_str(error.get("message")) or as_str(error.get("status")) or "error"


def response_info(data: dict[str, Any]) -> ResponseInfo:
    """A whole response's record."""
    acc = Accumulator()
    acc.add(data)
    return acc.info(complete=True)


class Accumulator:
    """Adds up response chunks (or one whole response) into a `ResponseInfo`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.finish: str | None = None
        self.usage_metadata: dict[str, Any] = {}  # the last non-empty one: cumulative, read at the end
        self.ident: str | None = None
        self.model: str | None = None
        self.error: str | None = None

    def add(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        get = data.get
        if get("error"):
            self.error = _error(data)
            return
        candidates = get("candidates")
        candidate = as_dict(candidates[0] if isinstance(candidates, list) and candidates else None)
        # A stream passes every chunk here (hundreds for a short answer), most of them one text part: the
        # parts are read in place, `text_of_parts` and `calls_of` as they would read them.
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if isinstance(parts, list):
            calling = False
            for part in parts:
                if isinstance(part, dict):
                    text = part.get("text")
                    if isinstance(text, str) and not part.get("thought"):
                        self.text.append(text)
                    calling = calling or "functionCall" in part or "function_call" in part
            if calling:
                self.calls += calls_of(parts_of(content), len(self.calls))
        finish = candidate.get("finishReason")
        if isinstance(finish, str):
            self.finish = finish
        feedback = get("promptFeedback")
        blocked = feedback.get("blockReason") if isinstance(feedback, dict) else None
        if isinstance(blocked, str):
            self.finish = blocked
        usage = get("usageMetadata")
        if isinstance(usage, dict) and usage:
            self.usage_metadata = usage
        self.ident = opt_str(get("responseId")) or self.ident
        self.model = opt_str(get("modelVersion")) or self.model

    def info(self, *, complete: bool, parse_error: str | None = None) -> ResponseInfo:
        calls = tuple(self.calls)
        return ResponseInfo(
            response_id=self.ident,
            model=self.model,
            text="".join(self.text),
            tool_calls=calls,
            handoffs=handoffs_of(calls),
            finish_reason=self.finish,
            usage=_usage(self.usage_metadata),
            error=self.error,
            complete=complete,
            parse_error=parse_error,
        )


class GeminiStreamParser:
    """SSE chunks (`alt=sse`), a JSON array streamed in pieces (each item read once it closes),
    or a bare JSON object (an error body sent on the streaming method, read at the end)."""

    def __init__(self) -> None:
        self._sse = SseSplitter()
        self._acc = Accumulator()
        self._array: JsonArrayItems | None = None
        self._object: bytearray | None = None
        self._started = False
        self._bad = 0

    def feed(self, chunk: bytes) -> None:
        if not self._started:
            stripped = chunk.lstrip()
            if not stripped:
                return
            self._started = True
            if stripped.startswith(b"["):
                self._array = JsonArrayItems()
            elif stripped.startswith(b"{"):
                self._object = bytearray()
        if self._array is not None:
            for item in self._array.feed(chunk):
                self._event(item)
        elif self._object is not None:
            self._object += chunk
        else:
            for event in self._sse.feed(chunk):
                self._event(event.data)

    def _event(self, data: bytes) -> None:
        try:
            self._acc.add(orjson.loads(data))
        except orjson.JSONDecodeError:
            self._bad += 1

    def close(self) -> ResponseInfo:
        if self._object is not None:
            self._event(bytes(self._object))
        elif self._array is None:
            for event in self._sse.rest():
                self._event(event.data)
            self._bad += self._sse.skipped  # events too large to read count as unparsable
        problem = f"{self._bad} unparsable chunks" if self._bad else None
        return self._acc.info(complete=self._acc.finish is not None, parse_error=problem)
