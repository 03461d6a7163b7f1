"""Chat Completions' transcript (`ProviderApi.transcript`): system and developer messages, then the tail."""

from __future__ import annotations

from typing import Any

from runguard.proxy.providers.transcript import Line, after_last, names_of, text_of


def _assistant(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant"


def transcript(body: dict[str, Any], first: bool) -> list[Line]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    lines = [
        Line("system", str(message["role"]), text_of(message.get("content")))
        for message in messages
        if first and isinstance(message, dict) and message.get("role") in ("system", "developer")
    ]
    names = names_of(
        (call.get("id"), (call.get("function") or {}).get("name"))
        for message in messages
        if isinstance(message, dict) and _assistant(message) and isinstance(message.get("tool_calls"), list)
        for call in message["tool_calls"]
        if isinstance(call, dict)
    )
    for message in after_last(messages, _assistant):
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            title = names.get(call_id) or str(message.get("name") or call_id)
            lines.append(Line("tool result", title, text_of(message.get("content"))))
        elif role == "user":
            lines.append(Line("user", "user", text_of(message.get("content"))))
    return lines
