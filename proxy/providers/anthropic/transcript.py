"""Anthropic Messages' transcript (`ProviderApi.transcript`): the top-level `system`, then the tail of
`messages`, whose user turns carry text and `tool_result` blocks (each titled with its `tool_use`'s name)."""

from __future__ import annotations

from typing import Any

from runguard.proxy.providers.transcript import Line, after_last, names_of, text_of


def _assistant(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant"


def _result(block: dict[str, Any], names: dict[str, str]) -> Line:
    call_id = str(block.get("tool_use_id", ""))
    title = names.get(call_id, call_id) + (" (error)" if block.get("is_error") else "")
    return Line("tool result", title, text_of(block.get("content")))


def transcript(body: dict[str, Any], first: bool) -> list[Line]:
    system = body.get("system")
    lines = [Line("system", "system", text_of(system))] if first and system else []
    messages = body.get("messages")
    if not isinstance(messages, list):
        return lines
    names = names_of(
        (block.get("id"), block.get("name"))
        for message in messages
        if isinstance(message, dict) and _assistant(message) and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    )
    for message in after_last(messages, _assistant):
        content = message.get("content")
        if message.get("role") != "user":
            continue
        if not isinstance(content, list):
            lines.append(Line("user", "user", text_of(content)))
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                lines.append(_result(block, names))
            elif isinstance(block, dict):
                lines.append(Line("user", "user", text_of([block])))
    return lines
