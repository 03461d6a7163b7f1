"""What the fake upstream answers: provider-native responses, whole and as SSE events.

Variant `j` is the tool call of step `j` of the agent loop in `bench.payloads`
(with usage that grows with `j`, as a real run's input tokens do); a `Text`
answers text instead: `LARGE`, about 300 KB in 3,000-character stream events,
or `TOKENS`, a short answer streamed as a model does, a few tokens an event.
Everything here is built once per variant and served as pre-serialized bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from bench.payloads import GEMINI_MODEL, LARGE_BYTES, OPENAI_MODEL, Api, big_text, tool_call

CREATED = 1_700_000_000


@dataclass(frozen=True)
class Text:
    """A text answer of about `size` characters, streamed `piece` characters an event."""

    size: int
    piece: int

    @cached_property
    def text(self) -> str:
        """Generated once (300 KB take 0.1 s): a response and its stream events all quote it."""
        return big_text(self.size)

    def pieces(self) -> list[str]:
        return _pieces(self.text, self.piece)


LARGE = Text(LARGE_BYTES, 3000)  # ~100 events of 3 KB
TOKENS = Text(4000, 16)  # ~250 deltas of about four tokens, as a model streams a short answer


def usage_of(variant: int) -> tuple[int, int]:
    """Input and output tokens of the answer to step `variant` (input grows with the conversation)."""
    return 700 + 260 * variant, 40


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(payload: Any, event: str | None = None, crlf: bool = False) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(payload) + (b"\r\n\r\n" if crlf else b"\n\n")


# -- OpenAI Chat Completions -------------------------------------------------------------------------


def _chat_usage(variant: int) -> dict[str, Any]:
    prompt, completion = usage_of(variant)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_base(variant: int, kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-bench{variant:06d}",
        "object": kind,
        "created": CREATED,
        "model": OPENAI_MODEL,
        "system_fingerprint": "fp_bench",
        "service_tier": "default",
    }


def chat_body(variant: int, answer: Text | None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    if answer is not None:
        message["content"] = answer.text
    else:
        call = tool_call(variant)
        message["tool_calls"] = [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments_json}}
        ]
    finish = "stop" if answer is not None else "tool_calls"
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return orjson.dumps({**_chat_base(variant, "chat.completion"), "choices": [choice], "usage": _chat_usage(variant)})


def chat_events(variant: int, answer: Text | None) -> list[bytes]:
    base = _chat_base(variant, "chat.completion.chunk")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**base, "choices": [choice], "usage": None})

    events = [chunk({"role": "assistant", "content": "" if answer is not None else None, "refusal": None})]
    if answer is not None:
        events += [chunk({"content": piece}) for piece in answer.pieces()]
    else:
        call = tool_call(variant)
        head = {"index": 0, "id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [head]}))
        events += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            for part in _pieces(call.arguments_json, 24)
        ]
    events.append(chunk({}, "stop" if answer is not None else "tool_calls"))
    events.append(_sse({**base, "choices": [], "usage": _chat_usage(variant)}))
    return [*events, b"data: [DONE]\n\n"]


# -- OpenAI Responses --------------------------------------------------------------------------------


def _response(variant: int, answer: Text | None, done: bool) -> dict[str, Any]:
    prompt, completion = usage_of(variant)
    output: list[dict[str, Any]]
    if answer is not None:
        part = {"type": "output_text", "text": answer.text, "annotations": [], "logprobs": []}
        output = [{"type": "message", "id": "msg_bench", "status": "completed", "role": "assistant", "content": [part]}]
    else:
        call = tool_call(variant)
        output = [
            {
                "type": "function_call",
                "id": f"fc_{call.call_id}",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments_json,
                "status": "completed",
            }
        ]
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }
    return {
        "id": f"resp_bench{variant:06d}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed" if done else "in_progress",
        "model": OPENAI_MODEL,
        "output": output if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage if done else None,
        "error": None,
        "incomplete_details": None,
    }


def responses_body(variant: int, answer: Text | None) -> bytes:
    return orjson.dumps(_response(variant, answer, done=True))


def responses_events(variant: int, answer: Text | None) -> list[bytes]:
    done = _response(variant, answer, done=True)
    item = done["output"][0]
    events: list[dict[str, Any]] = [{"type": "response.created", "response": _response(variant, answer, False)}]
    if answer is not None:
        text = item["content"][0]["text"]
        where = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            }
        )
        events.append(
            {
                "type": "response.content_part.added",
                **where,
                "part": {"type": "output_text", "text": "", "annotations": []},
            }
        )
        events += [
            {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []} for piece in answer.pieces()
        ]
        events.append({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
        events.append({"type": "response.content_part.done", **where, "part": item["content"][0]})
    else:
        where = {"item_id": item["id"], "output_index": 0}
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "arguments": "", "status": "in_progress"},
            }
        )
        events += [
            {"type": "response.function_call_arguments.delta", **where, "delta": part}
            for part in _pieces(item["arguments"], 24)
        ]
        events.append({"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]})
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": done})
    return [_sse({**event, "sequence_number": seq}, event["type"]) for seq, event in enumerate(events)]


# -- Gemini ------------------------------------------------------------------------------------------


def _gemini_usage(variant: int, output: int) -> dict[str, Any]:
    prompt, _ = usage_of(variant)
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }


def _gemini_chunk(variant: int, parts: list[dict[str, Any]], finish: bool, output: int) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": _gemini_usage(variant, output),
        "modelVersion": GEMINI_MODEL,
        "responseId": f"gem-bench{variant:06d}",
    }


def _gemini_parts(variant: int, answer: Text | None) -> list[dict[str, Any]]:
    if answer is not None:
        return [{"text": answer.text}]
    call = tool_call(variant)
    return [{"functionCall": {"name": call.name, "args": call.arguments}}]


def gemini_body(variant: int, answer: Text | None) -> bytes:
    return orjson.dumps(_gemini_chunk(variant, _gemini_parts(variant, answer), True, usage_of(variant)[1]))


def gemini_events(variant: int, answer: Text | None) -> list[bytes]:
    _, output = usage_of(variant)
    if answer is not None:
        pieces = answer.pieces()
        return [
            _sse(_gemini_chunk(variant, [{"text": p}], i == len(pieces) - 1, i + 1), crlf=True)
            for i, p in enumerate(pieces)
        ]
    first = _gemini_chunk(variant, [{"text": "Looking that up."}], False, 4)
    last = _gemini_chunk(variant, _gemini_parts(variant, None), True, output)
    return [_sse(first, crlf=True), _sse(last, crlf=True)]


def body(api: Api, variant: int, answer: Text | None) -> bytes:
    return {"chat": chat_body, "responses": responses_body, "gemini": gemini_body}[api](variant, answer)


def events(api: Api, variant: int, answer: Text | None) -> list[bytes]:
    return {"chat": chat_events, "responses": responses_events, "gemini": gemini_events}[api](variant, answer)


MODELS_LIST = orjson.dumps(
    {"object": "list", "data": [{"id": OPENAI_MODEL, "object": "model", "created": CREATED, "owned_by": "bench"}]}
)
GEMINI_MODELS_LIST = orjson.dumps({"models": [{"name": f"models/{GEMINI_MODEL}", "displayName": "bench"}]})
