"""Reading Responses answers: a Response object, and its typed event stream."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import Usage
from runguard.proxy.providers.openai_responses.output import FINAL_STATUSES, ResponsesStreamParser, response_info

RESPONSE: dict[str, Any] = {
    "id": "resp_1",
    "model": "gpt-4o",
    "status": "completed",
    "service_tier": "flex",
    "output": [
        {"type": "web_search_call", "action": {"type": "search"}},
        {"type": "web_search_call", "action": {"type": "open_page"}},
        {"type": "file_search_call"},
        {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "transfer_to_billing", "arguments": "{}"},
    ],
    "usage": {
        "input_tokens": 10,
        "output_tokens": 5,
        "input_tokens_details": {"cached_tokens": 4},
        "output_tokens_details": {"reasoning_tokens": 2},
    },
}


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)


def test_a_response_object() -> None:
    info = response_info(RESPONSE)
    assert (info.response_id, info.model, info.text, info.finish_reason) == ("resp_1", "gpt-4o", "Hi", "completed")
    assert [c.name for c in info.tool_calls] == ["transfer_to_billing"]
    assert [h.target for h in info.handoffs] == ["billing"]
    assert info.usage == Usage(10, 5, 4, 2, tool_calls=(("web_search", 1), ("file_search", 1)), service_tier="flex")
    assert info.error is None


def test_a_failed_response_is_an_error() -> None:
    assert response_info({"status": "failed"}).error == "response failed"
    assert response_info({"error": {"code": "server_error"}}).error == "server_error"
    assert "failed" in FINAL_STATUSES and "in_progress" not in FINAL_STATUSES


def test_the_terminal_event_s_response_wins() -> None:
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-4o"}},
        {"type": "response.output_text.delta", "delta": "H"},
        {"type": "response.completed", "response": RESPONSE},
    ]
    body = _sse(events)
    parser = ResponsesStreamParser()
    for at in range(0, len(body), 3):
        parser.feed(body[at : at + 3])
    assert parser.close() == response_info(RESPONSE)


def test_a_cut_stream_keeps_its_text_and_calls_and_is_incomplete() -> None:
    events = [
        {"type": "response.created", "response": {"id": "resp_2", "model": "gpt-4o"}},
        {"type": "response.output_text.delta", "delta": "Lo"},
        {"type": "response.output_text.delta", "delta": "oking"},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "name": "f", "call_id": "c9"},
        },
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "1}"},
        {"type": "error", "code": "server_error", "message": "boom"},
    ]
    parser = ResponsesStreamParser()
    parser.feed(_sse(events) + b"data: {nope\n\n")
    info = parser.close()
    assert (info.response_id, info.text, info.complete, info.error) == ("resp_2", "Looking", False, "boom")
    assert [(c.name, c.arguments, c.call_id) for c in info.tool_calls] == [("f", '{"a":1}', "c9")]
    assert info.parse_error == "1 unparsable events"


def test_a_websocket_frame_is_taken_parsed() -> None:
    parser = ResponsesStreamParser()
    parser.take({"type": "error", "error": {"message": "rate limited"}})
    parser.take(["not", "an", "event"])
    assert parser.close().error == "rate limited"
