"""Inline media (images, files, audio) weighed as a model counts them, not by their bytes.

A screenshot that a tool returns, or that a computer-use loop sends back,
travels as a `data:` URL of base64 text, often a megabyte or more; the model
counts an image as a few hundred tokens. Measured by its characters, one such
screenshot looked like 150k input tokens and stopped the request at
`context_window`. So before a JSON value is measured, each inline payload is
replaced with a digest of it (two results stay told apart by what they show)
and weighs `MEDIA_CHARS`.
"""

from __future__ import annotations

from typing import Any

from runguard.proxy.core.events import digest
from runguard.proxy.providers.common.conversation import CHARS_PER_TOKEN, Conversation
from runguard.proxy.providers.common.jsonish import dumps_text

# OpenAI bills a 1024x1024 image at high detail as 765 tokens (Gemini: 258 per 768x768 tile).
MEDIA_TOKENS = 765
MEDIA_CHARS = MEDIA_TOKENS * CHARS_PER_TOKEN
MIN_PAYLOAD = 256  # a shorter data: URL is measured as the text it is
# OpenAI content part types (Responses, Chat) that carry media
MEDIA_PARTS = frozenset({"input_image", "input_file", "input_audio", "image_url", "file"})
GEMINI_MEDIA = ("inlineData", "inline_data", "fileData", "file_data")  # Gemini part fields
MAX_DEPTH = 32  # deeper values are measured as they are


def shed(value: Any, depth: int = 0) -> tuple[Any, int]:
    """`value` with each inline payload (a `data:` URL of `MIN_PAYLOAD` characters or more) replaced by its
    media type and a digest of it, and how many were replaced. `value` itself is left as it was."""
    if isinstance(value, str):
        if len(value) >= MIN_PAYLOAD and value.startswith("data:"):
            return f"{_media_type(value)};xxh3={digest(value)}", 1
        return value, 0
    if depth >= MAX_DEPTH:
        return value, 0
    if isinstance(value, list):
        found = 0
        items = []
        for item in value:
            light, media = shed(item, depth + 1)
            items.append(light)
            found += media
        return (items, found) if found else (value, 0)
    if isinstance(value, dict):
        found = 0
        fields = {}
        for key, item in value.items():
            light, media = shed(item, depth + 1)
            fields[key] = light
            found += media
        return (fields, found) if found else (value, 0)
    return value, 0


def root_of(content: Any) -> str | None:
    """The root of a conversation whose first user message has media and no text (a voice message, a
    picture): a digest of the message, its media included (None for an empty one). Without it every such
    conversation of a key had no root, and all of them made one run."""
    return "media:" + digest(dumps_text(content)) if content else None


def user_said(talk: Conversation, text: str, content: Any) -> None:
    """A user message with this `text` and `content` (as the wire has it) reported to `talk`; the first one
    roots the conversation by its media when it has no text (`root_of`)."""
    if not text and talk.rootless:
        talk.rooted(root_of(content))
    talk.user(text)


def _media_type(url: str) -> str:
    """`data:<type>` of a data URL (`data:` if it names none within its first characters)."""
    for mark in (";", ","):
        end = url.find(mark, 5, 128)
        if end > 0:
            return url[:end]
    return "data:"


def parts(content: Any) -> int:
    """How many media parts a message's content list has (images, files, audio), inline or by URL."""
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, dict) and _is_media(part.get("type")))


def _is_media(kind: Any) -> bool:
    return isinstance(kind, str) and kind in MEDIA_PARTS


def inline_parts(parts: list[Any]) -> int:
    """How many of a Gemini content's parts are media (`inlineData` or `fileData`)."""
    found = 0
    for part in parts:  # run over every earlier user turn of a long conversation: no generator, text first
        if type(part) is dict and "text" not in part:
            found += any(key in part for key in GEMINI_MEDIA)
    return found
