"""Recorded bodies read for the run page: the new tail of each request, the answer, for each API."""

from __future__ import annotations

import orjson

from runguard.proxy.admin.ui.content import request_entries, response_entries
from tests.e2e import payloads


def _kinds(entries: list[object]) -> list[tuple[str, str, str]]:
    return [(e.kind, e.title, e.text) for e in entries]  # type: ignore[attr-defined]


def test_chat_completions_tail_and_answer() -> None:
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You extract data."},
            {"role": "user", "content": "Extract the total."},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                  "function": {"name": "parse", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "partial_parse_error"},
        ],
    }  # fmt: skip
    later = request_entries("/v1/chat/completions", orjson.dumps(body), first=False)
    assert _kinds(later) == [("tool result", "c1", "partial_parse_error")]  # only what is new since the answer
    first = request_entries("/v1/chat/completions", orjson.dumps({**body, "messages": body["messages"][:2]}), True)
    assert [e.kind for e in first] == ["system", "user"]
    answer = payloads.chat_completion(tool_calls=[("c2", "parse", '{"page": 2}')])
    assert _kinds(response_entries("/v1/chat/completions", orjson.dumps(answer))) == [
        ("tool call", "parse", '{"page": 2}')
    ]


def test_responses_and_gemini_tails() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    responses = {"model": "gpt-4o", "input": [call, {"type": "function_call_output", "call_id": "c1", "output": "42"}]}
    assert _kinds(request_entries("/v1/responses", orjson.dumps(responses), False)) == [("tool result", "c1", "42")]
    answered = {"functionResponse": {"name": "f", "response": {"v": 1}}}
    gemini = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [answered]},
        ]
    }
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    assert _kinds(request_entries(path, orjson.dumps(gemini), False)) == [("tool result", "f", '{"v":1}')]


def test_unreadable_bodies_show_nothing() -> None:
    assert request_entries("/v1/chat/completions", b"not json", True) == []
    assert response_entries("/v1/chat/completions", b"\x00garbage") == []
    assert response_entries("/v1/unknown", b"{}") == []
