"""Anthropic's transcript: the top-level `system` (text or blocks), then the user turns after the last
assistant one, each `tool_result` titled with its `tool_use`'s name (and marked when it is an error)."""

from __future__ import annotations

from runguard.proxy.providers.anthropic.transcript import transcript

BODY = {
    "system": [{"type": "text", "text": "You are careful."}],
    "messages": [
        {"role": "user", "content": "Read the file."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "no such file"}],
                 "is_error": True},
                {"type": "image", "source": {}},
            ],
        },
    ],
}  # fmt: skip


def test_the_system_prompt_and_the_result_s_text_under_its_tool_s_name() -> None:
    lines = [(line.kind, line.title, line.text) for line in transcript(BODY, True)]
    assert lines == [
        ("system", "system", "You are careful."),
        ("tool result", "read (error)", "no such file"),
        ("user", "user", "[image]"),
    ]
    assert [line.kind for line in transcript(BODY, False)] == ["tool result", "user"]


def test_a_plain_user_turn_is_one_line() -> None:
    body = {"system": "S", "messages": [{"role": "user", "content": "Hello"}]}
    assert [(line.kind, line.text) for line in transcript(body, False)] == [("user", "Hello")]
