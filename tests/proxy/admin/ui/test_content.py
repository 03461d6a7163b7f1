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
    later = request_entries("chat", orjson.dumps(body), first=False)
    assert _kinds(later) == [("tool result", "parse", "partial_parse_error")]  # only what is new since the answer
    first = request_entries("chat", orjson.dumps({**body, "messages": body["messages"][:2]}), True)
    assert [e.kind for e in first] == ["system", "user"]
    answer = payloads.chat_completion(tool_calls=[("c2", "parse", '{"page": 2}')])
    assert _kinds(response_entries("chat", orjson.dumps(answer))) == [("tool call", "parse", '{"page": 2}')]


def test_responses_and_gemini_tails() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    responses = {"model": "gpt-4o", "input": [call, {"type": "function_call_output", "call_id": "c1", "output": "42"}]}
    assert _kinds(request_entries("responses", orjson.dumps(responses), False)) == [("tool result", "f", "42")]
    answered = {"functionResponse": {"name": "f", "response": {"v": 1}}}
    gemini = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [answered]},
        ]
    }
    assert _kinds(request_entries("gemini", orjson.dumps(gemini), False)) == [("tool result", "f", '{"v":1}')]


def test_unreadable_bodies_show_nothing() -> None:
    assert request_entries("chat", b"not json", True) == []
    assert response_entries("chat", b"\x00garbage") == []
    assert response_entries("other", b"{}") == [] and request_entries("other", b"{}", True) == []
    assert _kinds(request_entries("messages", b'{"system": {"not": "text"}, "messages": 3}', True)) == [
        ("system", "system", '{"not":"text"}')
    ]  # read as far as it goes
