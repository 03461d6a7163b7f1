"""Responses' transcript (`ProviderApi.transcript`): `instructions`, then the tail of `input`."""

from __future__ import annotations

from typing import Any

from runguard.proxy.providers.transcript import Line, after_last, names_of, text_of


def _answered(item: dict[str, Any]) -> bool:
    return item.get("role") == "assistant" or item.get("type") == "function_call"


def transcript(body: dict[str, Any], first: bool) -> list[Line]:
    instructions = body.get("instructions")
    lines = [Line("system", "instructions", text_of(instructions))] if first and instructions else []
    items = body.get("input")
    if isinstance(items, str):
        return [*lines, Line("user", "user", items)]
    if not isinstance(items, list):
        return lines
    names = names_of(
        (item.get("call_id"), item.get("name"))
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call"
    )
    for item in after_last(items, _answered):
        role = item.get("role")
        if item.get("type") == "function_call_output":
            call_id = str(item.get("call_id", ""))
            lines.append(Line("tool result", names.get(call_id, call_id), text_of(item.get("output"))))
        elif role == "user":
            lines.append(Line("user", "user", text_of(item.get("content"))))
        elif role in ("system", "developer"):
            lines.append(Line("system", str(role), text_of(item.get("content"))))
    return lines
