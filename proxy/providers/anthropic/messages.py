"""Reading an Anthropic Messages request's conversation: `system` and `messages`.

Roles are only `user` and `assistant`; content is a string or a list of
blocks. An assistant turn holds `text`, `thinking` / `redacted_thinking`,
`tool_use` (a call the client runs) and server tool blocks (`server_tool_use`
and its `*_tool_result`, run by Anthropic inside the same turn: no call for
the agent loop, only characters). The results of the client's calls come back
in the next user message as `tool_result` blocks (`tool_use_id`, `content` a
string or text/image blocks, optional `is_error`), possibly with text after
them. `image` and `document` blocks are media: weighed as a model counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runguard.proxy.core.events import ToolCall, digest
from runguard.proxy.providers.common import media
from runguard.proxy.providers.common.conversation import Conversation, last_index
from runguard.proxy.providers.common.history import keep_turns
from runguard.proxy.providers.common.jsonish import as_list, as_str, dumps_text, opt_str

MEDIA_BLOCKS = ("image", "document")  # a tuple: a block's type may be any JSON value, hashable or not


def _is_assistant(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant"


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as blocks (a bare string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in as_list(content) if isinstance(block, dict)]


def text_of(blocks: list[dict[str, Any]], *, thinking: bool = False) -> str:
    """The text of `text` blocks (and `thinking` ones when asked), joined."""
    pieces = [as_str(b.get("text")) for b in blocks if b.get("type") == "text"]
    if thinking:
        pieces += [as_str(b.get("thinking")) for b in blocks if b.get("type") == "thinking"]
    return "".join(pieces)


def call_fields(blocks: list[dict[str, Any]]) -> Iterator[tuple[str, str, str | None]]:
    """(name, arguments, call id) of each `tool_use` block: the calls the client runs."""
    for block in blocks:
        if block.get("type") == "tool_use":
            raw = block.get("input")
            yield as_str(block.get("name")), dumps_text(raw if raw is not None else {}), opt_str(block.get("id"))


def calls_of(blocks: list[dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(name, args, call_id, index) for index, (name, args, call_id) in enumerate(call_fields(blocks))]


def _other_chars(blocks: list[dict[str, Any]]) -> int:
    """Characters of an assistant turn beyond its text and calls: server tool blocks, what they found."""
    chars = 0
    for block in blocks:
        kind = block.get("type")
        if kind in ("server_tool_use", "mcp_tool_use") or (isinstance(kind, str) and kind.endswith("_tool_result")):
            light, _ = media.shed(block)
            chars += len(dumps_text(light))
    return chars


def result_content(block: dict[str, Any]) -> tuple[str, dict[str, Any] | None, int]:
    """A `tool_result` block's content as text, the object it is dumped from (for an error result: the
    wire's `is_error` and content, so an error and a success with the same words differ), and its media."""
    raw = block.get("content")
    parts = _blocks(raw) if isinstance(raw, list) else []
    found = sum(1 for part in parts if part.get("type") in MEDIA_BLOCKS)
    text = raw if isinstance(raw, str) else text_of(parts)
    if found:  # an image's bytes are not its words: a digest of them tells two screenshots apart
        text = dumps_text([_light(part) for part in parts])
    if block.get("is_error") is True:
        value = {"is_error": True, "content": text}
        return dumps_text(value), value, found
    return text, None, found


def _light(block: dict[str, Any]) -> dict[str, Any]:
    """A media block with its inline bytes (`source.data`, base64) replaced by their media type and digest."""
    source = block.get("source")
    if block.get("type") not in MEDIA_BLOCKS or not isinstance(source, dict) or not isinstance(source.get("data"), str):
        return block
    data = source["data"]
    return {**block, "source": {**source, "data": f"{as_str(source.get('media_type'))};xxh3={digest(data)}"}}


def _media(blocks: list[dict[str, Any]]) -> int:
    return sum(1 for block in blocks if block.get("type") in MEDIA_BLOCKS)


def _read_user(talk: Conversation, content: Any, *, earlier: bool) -> None:
    blocks = _blocks(content)
    answered = False
    for block in blocks:
        if block.get("type") != "tool_result":
            continue
        answered = True
        text, value, found = result_content(block)
        if earlier:
            talk.earlier_result(len(text))
        else:
            talk.result(opt_str(block.get("tool_use_id")), None, text, value)
        talk.weigh(found * media.MEDIA_CHARS)
    text = text_of(blocks)
    if text or not answered:
        media.user_said(talk, text, content)
    talk.weigh(_media(blocks) * media.MEDIA_CHARS)


def _read_message(talk: Conversation, message: dict[str, Any], *, earlier: bool) -> None:
    role, content = message.get("role"), message.get("content")
    if role == "assistant":
        blocks = _blocks(content)
        chars = len(text_of(blocks, thinking=True)) + _other_chars(blocks)
        if earlier:
            talk.earlier_assistant(chars, call_fields(blocks))
        else:
            talk.assistant(chars, calls_of(blocks))
    elif role == "user":
        _read_user(talk, content, earlier=earlier)
    else:
        talk.other(len(dumps_text(content)) if content is not None else 0)


def _span(talk: Conversation, messages: list[Any], start: int, stop: int) -> None:
    """Report `messages[start:stop]`, turns before the last assistant turn (counted, never kept)."""
    for index in range(start, stop):
        item = messages[index]
        _read_message(talk, item if type(item) is dict else {}, earlier=True)


def _read_tail(talk: Conversation, messages: list[Any], start: int) -> None:
    for index in range(start, len(messages)):
        item = messages[index]
        _read_message(talk, item if type(item) is dict else {}, earlier=False)


def read_messages(talk: Conversation, raw: Any) -> None:
    """Report the `messages` to `talk`: the ones before the last assistant turn counted, the rest read."""
    messages = as_list(raw)
    tail = max(last_index(messages, _is_assistant), 0)
    _span(talk, messages, 0, tail)
    _read_tail(talk, messages, tail)


def keep_messages(talk: Conversation, messages: list[Any], resumed: bool) -> Conversation | None:
    """`read_messages`, and the conversation of all `messages` read as earlier turns (`history.ItemsReader`)."""
    return keep_turns(talk, messages, resumed, _is_assistant, _span, _read_tail)


def system_text(raw: Any) -> str:
    """The `system` field's text: a string, or text blocks (`cache_control` on them changes nothing)."""
    return raw if isinstance(raw, str) else "\n".join(as_str(b.get("text")) for b in _blocks(raw))
