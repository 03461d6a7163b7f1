"""A nudge's note in a Messages request: a text block after the last user message's tool results."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.anthropic.nudge import with_note

NOTE = "RunGuard: you called search with the same arguments 3 times."


def nudged(body: dict[str, Any] | bytes) -> bytes | None:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return with_note(raw, orjson.loads(raw), NOTE)


def test_the_note_follows_the_tool_results_and_every_other_byte_is_kept() -> None:
    raw = (
        b'{"model":"claude-haiku-4-5", "system": [{"type":"text","text":"Be brief.",'
        b' "cache_control":{"type":"ephemeral"}}],'
        b' "messages": [{"role":"user","content":"Find INV-7"},'
        b' {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"search","input":{"q":"x"}}]},'
        b' {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"none"}]}], "max_tokens": 1e3}'
    )
    found = nudged(raw)
    assert found is not None
    data = orjson.loads(found)
    assert data["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "none"},
        {"type": "text", "text": NOTE},
    ]
    assert data["system"] == orjson.loads(raw)["system"]  # the cached prefix is untouched
    added = b',{"type":"text","text":' + orjson.dumps(NOTE) + b"}"
    assert found.replace(added, b"") == raw  # 1e3 and the spacing: the client's bytes


def test_no_note_where_the_last_message_is_no_list_of_user_blocks() -> None:
    assert nudged({"model": "m", "messages": [{"role": "user", "content": "plain question"}]}) is None
    prefill = [{"role": "user", "content": [{"type": "text", "text": "q"}]}, {"role": "assistant", "content": "A:"}]
    assert nudged({"model": "m", "messages": prefill}) is None
    assert nudged({"model": "m", "messages": []}) is None
    assert nudged({"model": "m"}) is None
