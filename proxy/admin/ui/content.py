"""What a recorded request said and what its answer said, for the run page (store.record_bodies only).

The request side is the conversation's new tail: everything after the last
assistant turn it carries (the tool results the agent sends back, a new user
message), read from the body's JSON for Chat Completions (`messages`),
Responses (`input`) and Gemini (`contents`). The first request of a run also
shows its system prompt. The answer is read by the provider's adapter (plain
bodies and streams alike): its text, its tool calls with their arguments, and
handoffs. A body that cannot be read shows nothing (fail open: it is only a view).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.providers.routes import resolve

MAX_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str  # system, user, tool result, assistant, tool call, handoff, error
    title: str  # a tool's name, a role
    text: str


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + f"… ({len(text) - MAX_CHARS} more characters)"


def _text_of(content: Any) -> str:
    """Text of a message's content: a string, or parts with `text` (other parts named by their type)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict):
                texts.append(str(part.get("text") or part.get("output") or f"[{part.get('type', 'part')}]"))
            else:
                texts.append(str(part))
        return "\n".join(texts)
    return "" if content is None else orjson.dumps(content).decode()


def _chat_tail(messages: list[Any], first: bool) -> list[Entry]:
    last = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1)
    entries = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        if role in ("system", "developer") and first:
            entries.append(Entry("system", role, _text_of(message.get("content"))))
        elif i > last and role == "tool":
            entries.append(
                Entry(
                    "tool result",
                    str(message.get("name") or message.get("tool_call_id") or ""),
                    _text_of(message.get("content")),
                )
            )
        elif i > last and role == "user":
            entries.append(Entry("user", role, _text_of(message.get("content"))))
    return entries


def _responses_tail(body: dict[str, Any], first: bool) -> list[Entry]:
    items = body.get("input")
    entries = [Entry("system", "instructions", str(body["instructions"]))] if first and body.get("instructions") else []
    if isinstance(items, str):
        return [*entries, Entry("user", "user", items)]
    if not isinstance(items, list):
        return entries
    last = max(
        (
            i
            for i, it in enumerate(items)
            if isinstance(it, dict) and (it.get("role") == "assistant" or it.get("type") == "function_call")
        ),
        default=-1,
    )
    for item in items[last + 1 :]:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":
            entries.append(Entry("tool result", str(item.get("call_id", "")), _text_of(item.get("output"))))
        elif item.get("role") in ("user", "system", "developer"):
            entries.append(
                Entry("user" if item["role"] == "user" else "system", str(item["role"]), _text_of(item.get("content")))
            )
    return entries


def _gemini_tail(body: dict[str, Any], first: bool) -> list[Entry]:
    entries = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if first and isinstance(system, dict):
        entries.append(Entry("system", "system", _text_of(system.get("parts"))))
    contents = body.get("contents")
    if not isinstance(contents, list):
        return entries
    last = max((i for i, c in enumerate(contents) if isinstance(c, dict) and c.get("role") == "model"), default=-1)
    for content in contents[last + 1 :]:
        for part in content.get("parts", []) if isinstance(content, dict) else []:
            if not isinstance(part, dict):
                continue
            if "functionResponse" in part:
                answer = part["functionResponse"]
                entries.append(
                    Entry("tool result", str(answer.get("name", "")), orjson.dumps(answer.get("response")).decode())
                )
            elif "text" in part:
                entries.append(Entry("user", "user", str(part["text"])))
    return entries


def request_entries(path: str, body: bytes, first: bool) -> list[Entry]:
    """The new tail of a recorded request (see the module docstring); [] when it cannot be read."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(data, dict):
        return []
    if isinstance(data.get("messages"), list):
        entries = _chat_tail(data["messages"], first)
    elif "contents" in data:
        entries = _gemini_tail(data, first)
    elif "input" in data:
        entries = _responses_tail(data, first)
    else:
        entries = []
    return [Entry(e.kind, e.title, _clip(e.text)) for e in entries]


def response_entries(path: str, body: bytes) -> list[Entry]:
    """The answer's text, tool calls and handoffs, read by the provider's adapter."""
    route = resolve(path)
    adapter = adapter_for(route.api) if route is not None else None
    if adapter is None or not body:
        return []
    try:
        if body.lstrip().startswith((b"data:", b"event:")):
            parser = adapter.stream_parser()
            parser.feed(body)
            info = parser.close()
        else:
            info = adapter.parse_response(body)
    except Exception:  # a view never fails on a body it cannot read
        return []
    entries = [Entry("assistant", "assistant", _clip(info.text))] if info.text else []
    entries += [Entry("tool call", call.name, _clip(call.arguments)) for call in info.tool_calls]
    entries += [Entry("handoff", handoff.tool, f"to {handoff.target}") for handoff in info.handoffs]
    if info.error:
        entries.append(Entry("error", "error", _clip(info.error)))
    return entries
