"""The Chat Completions adapter on what a completion says beside its message (whole cases: fixtures/)."""

from __future__ import annotations

import orjson
import pytest

from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from tests.e2e import payloads


@pytest.mark.parametrize("tier", ["priority", None])
def test_the_service_tier_comes_with_the_usage_whole_and_streamed(tier: str | None) -> None:
    named = {"service_tier": tier} if tier else {}
    whole = ChatAdapter().parse_response(orjson.dumps({**payloads.chat_completion(), **named}))
    parser = ChatAdapter().stream_parser()
    for chunk in payloads.chat_stream(with_usage=True):
        event = orjson.loads(chunk[6:]) if chunk.startswith(b"data: {") else None
        parser.feed(chunk if event is None else b"data: " + orjson.dumps({**event, **named}) + b"\n\n")
    for info in (whole, parser.close()):
        assert info.usage is not None and info.usage.service_tier == tier


def test_a_completion_s_audio_tokens_come_with_the_usage() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 50,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 80},
        "completion_tokens_details": {"audio_tokens": 30},
    }
    info = ChatAdapter().parse_response(orjson.dumps({**payloads.chat_completion(), "usage": usage}))
    assert info.usage is not None and (info.usage.audio_input_tokens, info.usage.audio_output_tokens) == (80, 30)
