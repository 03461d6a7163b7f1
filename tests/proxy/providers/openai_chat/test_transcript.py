"""Chat's transcript: system and developer messages on a run's first request, then the tail, each tool
result titled with the name of the call it answers."""

from __future__ import annotations

from runguard.proxy.providers.openai_chat.transcript import transcript

CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
BODY = {
    "messages": [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "Find it."},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "found"}]},
        {"role": "user", "content": "Thanks."},
    ]
}


def test_the_first_request_shows_its_system_prompt_and_a_later_one_only_its_tail() -> None:
    first = [(line.kind, line.title, line.text) for line in transcript(BODY, True)]
    assert first == [("system", "system", "Be exact."), ("tool result", "lookup", "found"), ("user", "user", "Thanks.")]
    assert [line.kind for line in transcript(BODY, False)] == ["tool result", "user"]


def test_a_result_of_an_unknown_call_keeps_its_id_and_a_body_without_messages_says_nothing() -> None:
    body = {"messages": [{"role": "tool", "tool_call_id": "c9", "content": "x"}]}
    assert transcript(body, False)[0].title == "c9"
    assert transcript({"messages": "no"}, True) == []
