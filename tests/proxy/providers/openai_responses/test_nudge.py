"""A nudge's note in a Responses request: a developer input item, every other byte kept."""

from __future__ import annotations

import orjson

from runguard.proxy.providers.openai_responses.nudge import with_note

ITEM = b'{"type":"message","role":"developer","content":"note"}'


def _noted(body: bytes) -> bytes | None:
    return with_note(body, orjson.loads(body), "note")


def test_an_item_is_appended_to_a_list_input() -> None:
    body = b'{"input": [{"role": "user", "content": "hi"}], "instructions": "be brief"}'
    assert _noted(body) == body.replace(b'"hi"}]', b'"hi"},' + ITEM + b"]")


def test_a_string_input_becomes_the_user_message_and_the_note() -> None:
    body = b'{"model":"m","input":"hi \\"there\\""}'
    noted = _noted(body)
    assert noted == b'{"model":"m","input":[{"role":"user","content":"hi \\"there\\""},' + ITEM + b"]}"
    assert orjson.loads(noted)["input"][0]["content"] == 'hi "there"'


def test_no_input_no_note() -> None:
    assert _noted(b'{"model":"m"}') is None
    assert _noted(b'{"input":{"role":"user"}}') is None
