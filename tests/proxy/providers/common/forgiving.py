"""The reference readers the fast conversation readers must agree with (test oracles, not shipped).

Each reads every turn of a conversation one by one through its API's forgiving per-turn reader
(`_read_message`, `_read_item`, `_read_content`), which accepts any shape; the fast readers
(`read_messages`, `read_input`, `read_contents`) count the usual shapes of finished turns in one pass.
Property tests (`test_earlier_turns`, `test_media`) hold that both report the same to a `Conversation`.
"""

from __future__ import annotations

from typing import Any

from runguard.proxy.providers.common.conversation import Conversation, last_index
from runguard.proxy.providers.common.jsonish import as_list, text_of
from runguard.proxy.providers.gemini import contents
from runguard.proxy.providers.openai_chat import adapter as chat
from runguard.proxy.providers.openai_responses import input as responses


def read_messages_forgiving(talk: Conversation, raw: Any) -> None:
    """Chat's `messages`, one by one."""
    messages = as_list(raw)
    tail = last_index(messages, chat._is_assistant)
    for position, item in enumerate(messages):
        message = item if type(item) is dict else {}
        role, content = message.get("role"), message.get("content")
        if position < tail and role == "assistant":
            talk.earlier_assistant(len(text_of(content)), chat.call_fields(message.get("tool_calls")))
        elif position < tail and role in ("tool", "function"):
            talk.earlier_result(len(text_of(content)))
        else:
            chat._read_message(talk, message, role, content)


def read_input_forgiving(talk: Conversation, items: Any) -> None:
    """Responses' `input` items, every one through `_read_item`."""
    if isinstance(items, str):
        talk.user(items)
        return
    listed = as_list(items)
    tail = last_index(listed, responses._is_assistant)
    for position, raw in enumerate(listed):
        responses._read_item(talk, raw, earlier=position < tail)


def read_contents_forgiving(talk: Conversation, raw: Any) -> None:
    """Gemini's `contents`, every one through `_read_content`."""
    listed = as_list(raw)
    tail = last_index(listed, contents._is_model)
    for position, content in enumerate(listed):
        contents._read_content(talk, content, earlier=position < tail)
