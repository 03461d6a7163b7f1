"""A nudge's note in a Chat Completions request: a last message, in the role the conversation already uses."""

from __future__ import annotations

import orjson

from runguard.proxy.providers.openai_chat.nudge import with_note


def _noted(body: bytes) -> bytes | None:
    return with_note(body, orjson.loads(body), "note")


def test_a_system_message_is_appended_and_the_rest_is_the_client_s_bytes() -> None:
    body = b'{"messages": [{"role":"user","content":"hi"} ], "temperature": 1.50}'
    assert _noted(body) == body.replace(b'"hi"} ]', b'"hi"} ,{"role":"system","content":"note"}]')


def test_the_developer_role_when_the_conversation_uses_it() -> None:
    noted = _noted(b'{"messages":[{"role":"developer","content":"d"},{"role":"user","content":"u"}]}')
    assert noted is not None and orjson.loads(noted)["messages"][-1] == {"role": "developer", "content": "note"}


def test_no_messages_list_no_note() -> None:
    assert _noted(b'{"messages":"hi"}') is None
    assert _noted(b'{"prompt":"hi"}') is None
