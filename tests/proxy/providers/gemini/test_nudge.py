"""A nudge's note in a generateContent request: a part of its system instruction, every other byte kept."""

from __future__ import annotations

import orjson

from runguard.proxy.providers.gemini.nudge import with_note

PART = b'{"text":"note"}'


def _noted(body: bytes) -> bytes | None:
    return with_note(body, orjson.loads(body), "note")


def test_a_system_instruction_is_created_first_when_absent() -> None:
    assert _noted(b'{"contents":[]}') == b'{"systemInstruction":{"parts":[' + PART + b']},"contents":[]}'
    assert _noted(b" { } ") == b' {"systemInstruction":{"parts":[' + PART + b"]} } "  # the client's space stays


def test_a_part_is_appended_to_the_instruction_in_either_spelling() -> None:
    body = b'{"system_instruction": {"parts": [{"text": "be brief"}]}, "contents": []}'
    assert _noted(body) == body.replace(b'"be brief"}]', b'"be brief"},' + PART + b"]")
    camel = b'{"systemInstruction":{"role":"system","parts":[]}}'
    assert _noted(camel) == b'{"systemInstruction":{"role":"system","parts":[' + PART + b"]}}"


def test_an_odd_instruction_is_left_alone() -> None:
    assert _noted(b'{"systemInstruction":"text"}') is None
    assert _noted(b'{"systemInstruction":{"parts":"x"}}') is None


def test_a_request_on_cached_content_gets_no_note() -> None:
    """Gemini answers 400 to a system instruction beside `cachedContent`: the request goes as it came."""
    for name in (b"cachedContent", b"cached_content"):
        assert _noted(b'{"' + name + b'":"cachedContents/abc","contents":[]}') is None
