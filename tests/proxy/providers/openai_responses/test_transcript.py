"""Responses' transcript: `instructions`, then the tail of `input` (a string is one user line)."""

from __future__ import annotations

from runguard.proxy.providers.openai_responses.transcript import transcript


def test_instructions_then_the_results_of_the_last_calls_by_name() -> None:
    body = {
        "instructions": "Be kind.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]},
            {"type": "function_call", "call_id": "c1", "name": "step", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"role": "developer", "content": "Hurry."},
        ],
    }
    lines = [(line.kind, line.title, line.text) for line in transcript(body, True)]
    assert lines == [
        ("system", "instructions", "Be kind."),
        ("tool result", "step", "ok"),
        ("system", "developer", "Hurry."),
    ]
    assert [line.kind for line in transcript(body, False)] == ["tool result", "system"]


def test_a_string_input_is_one_user_line_and_no_input_is_none() -> None:
    assert [(line.kind, line.text) for line in transcript({"input": "Hi"}, False)] == [("user", "Hi")]
    assert transcript({"input": 3}, False) == []
