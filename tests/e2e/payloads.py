"""Realistic provider payloads for end-to-end tests (shapes from wire-formats.md)."""

from __future__ import annotations

from typing import Any

import orjson


def chat_completion(
    text: str = "Hello!",
    tool_calls: list[tuple[str, str, str]] | None = None,
    usage: tuple[int, int] = (12, 5),
    model: str = "gpt-4o-mini",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if tool_calls else text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in tool_calls
        ]
    return {
        "id": "chatcmpl-e2e",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        "system_fingerprint": "fp_e2e",
    }


def chat_stream(text: str = "Hello there!", with_usage: bool = False, model: str = "gpt-4o-mini") -> list[bytes]:
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1700000000, "model": model}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    chunks += [
        {**base, "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
        for part in (text[: len(text) // 2], text[len(text) // 2 :])
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if with_usage:
        chunks.append(
            {**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}
        )
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def response_object(text: str = "Hi from responses", calls: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if calls:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{cid}",
                "call_id": cid,
                "name": name,
                "arguments": args,
                "status": "completed",
            }
            for cid, name, args in calls
        ]
    else:
        output = [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ]
    return {
        "id": "resp_e2e",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": "gpt-4o",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 20,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 6,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 26,
        },
    }


def researched(searches: int) -> dict[str, Any]:
    """A Response after `searches` hosted web searches (each opening a page), a file search and its answer."""
    output: list[dict[str, Any]] = []
    for n in range(searches):
        output.append(
            {
                "type": "web_search_call",
                "id": f"ws_{n}",
                "status": "completed",
                "action": {"type": "search", "query": f"q{n}"},
            }
        )
        output.append(
            {"type": "web_search_call", "id": f"wo_{n}", "status": "completed", "action": {"type": "open_page"}}
        )
    output.append({"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"], "results": None})
    return {**response_object("found"), "output": [*output, *response_object("found")["output"]]}


def responses_stream(text: str = "streamed words") -> list[bytes]:
    done = response_object(text)
    in_progress = {**done, "status": "in_progress", "output": [], "usage": None}
    item = done["output"][0]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": in_progress},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
        },
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": text, "annotations": []},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": done},
    ]
    out = []
    for seq, event in enumerate(events):
        event["sequence_number"] = seq
        out.append(f"event: {event['type']}\n".encode() + b"data: " + orjson.dumps(event) + b"\n\n")
    return out


def responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a streamed `response` comes as (also one per message over a WebSocket): created, each output
    item added and done, completed."""
    in_progress = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": in_progress}]
    for index, item in enumerate(response["output"]):
        started = {**item, "status": "in_progress"}
        if item["type"] == "message":
            started["content"] = []
        events.append({"type": "response.output_item.added", "output_index": index, "item": started})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": seq} for seq, event in enumerate(events)]


def gemini_response(
    text: str = "Gemini says hi",
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    usage: tuple[int, int] = (7, 3),
    model: str = "gemini-2.5-flash",
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = (
        [{"functionCall": {"name": n, "args": a}} for n, a in calls] if calls else [{"text": text}]
    )
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "totalTokenCount": sum(usage),
        },
        "modelVersion": model,
        "responseId": "gem-e2e",
    }


def gemini_stream(text: str = "Gemini streams") -> list[bytes]:
    first = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text[:5]}]}, "index": 0}],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 1, "totalTokenCount": 5},
    }
    last = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text[5:]}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 3, "totalTokenCount": 7},
    }
    return [b"data: " + orjson.dumps(first) + b"\r\n\r\n", b"data: " + orjson.dumps(last) + b"\r\n\r\n"]
