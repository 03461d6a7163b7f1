"""Gemini's transcript (`ProviderApi.transcript`): `systemInstruction`, then the tail of `contents`."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.transcript import Line, after_last, text_of


def _model(content: dict[str, Any]) -> bool:
    return content.get("role") == "model"


def _part(part: dict[str, Any]) -> Line | None:
    answer = part.get("functionResponse") or part.get("function_response")
    if isinstance(answer, dict):
        return Line("tool result", str(answer.get("name", "")), orjson.dumps(answer.get("response")).decode())
    if isinstance(part.get("text"), str):
        return Line("user", "user", part["text"])
    kind = next(iter(part), "part")
    return Line("user", "user", f"[{kind}]")


def transcript(body: dict[str, Any], first: bool) -> list[Line]:
    lines = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if first and system:
        parts = system.get("parts") if isinstance(system, dict) else system
        lines.append(Line("system", "system", text_of(parts)))
    contents = body.get("contents")
    if not isinstance(contents, list):
        return lines
    for content in after_last(contents, _model):
        parts = content.get("parts")
        for part in parts if isinstance(parts, list) else []:
            line = _part(part) if isinstance(part, dict) and part else None
            if line is not None:
                lines.append(line)
    return lines
