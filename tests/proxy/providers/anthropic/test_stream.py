"""Anthropic responses and streams: usage with prompt caching, server tool billing, errors."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.providers.anthropic.stream import MessagesStreamParser, message_info, usage_of


def event(kind: str, **payload: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **payload}) + b"\n\n"


def test_input_is_the_total_with_cache_reads_and_writes_named_apart() -> None:
    usage = usage_of(
        {
            "input_tokens": 10,
            "cache_read_input_tokens": 3000,
            "cache_creation_input_tokens": 500,
            "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 300},
            "output_tokens": 42,
            "output_tokens_details": {"thinking_tokens": 30},
        }
    )
    assert usage is not None
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (3510, 3000, 42)
    assert (usage.cache_write_tokens, usage.cache_write_1h_tokens, usage.reasoning_tokens) == (200, 300, 30)


def test_cache_writes_without_a_breakdown_are_5_minute_writes() -> None:
    usage = usage_of({"input_tokens": 1, "cache_creation_input_tokens": 700, "output_tokens": 2})
    assert usage is not None and (usage.cache_write_tokens, usage.cache_write_1h_tokens) == (700, 0)


def test_cached_tokens_are_priced_at_their_rates() -> None:
    """Haiku 4.5: input 1.00, cache read 0.10, 5m write 1.25, 1h write 2.00, output 5.00 USD per 1M."""
    usage = usage_of(
        {
            "input_tokens": 1_000_000,
            "cache_read_input_tokens": 2_000_000,
            "cache_creation_input_tokens": 7_000_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 3_000_000, "ephemeral_1h_input_tokens": 4_000_000},
            "output_tokens": 1_000_000,
        }
    )
    cost = ModelTables().cost("claude-haiku-4-5-20251001", usage)
    assert cost == pytest.approx(1.00 + 0.20 + 3.75 + 8.00 + 5.00)
    counted_as_input = 10_000_000 * 1.00 / 1_000_000 + 5.00
    assert cost != pytest.approx(counted_as_input)


def test_web_searches_are_billed_per_call() -> None:
    usage = usage_of({"input_tokens": 0, "output_tokens": 0, "server_tool_use": {"web_search_requests": 3}})
    assert usage is not None and usage.tool_calls == (("web_search", 3),)
    assert ModelTables().cost("claude-sonnet-4-6", usage) == pytest.approx(0.03)  # USD 10 per 1k searches


def test_an_error_body_is_an_error() -> None:
    info = message_info({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert info.error == "Overloaded" and info.usage is None


def test_a_stream_merges_its_usage_and_skips_pings_and_unknown_events() -> None:
    start = {"id": "msg_1", "model": "claude-opus-4-6", "usage": {"input_tokens": 5, "cache_read_input_tokens": 90}}
    chunks = [
        event("message_start", message={**start, "content": [], "stop_reason": None}),
        event("ping"),
        event("content_block_start", index=0, content_block={"type": "text", "text": "Hi"}),
        event("content_block_delta", index=0, delta={"type": "text_delta", "text": " there"}),
        event("some_future_event", value=1),
        event("content_block_stop", index=0),
        event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 7, "input_tokens": None}),
        event("message_stop"),
    ]
    parser = MessagesStreamParser()
    for chunk in chunks:
        parser.feed(chunk)
    info = parser.close()
    assert (info.text, info.finish_reason, info.response_id, info.model) == (
        "Hi there",
        "end_turn",
        "msg_1",
        start["model"],
    )
    assert info.usage is not None and (info.usage.input_tokens, info.usage.output_tokens) == (95, 7)
    assert info.complete and info.parse_error is None


def test_a_call_whose_block_start_was_lost_still_counts_its_arguments() -> None:
    parser = MessagesStreamParser()
    parser.feed(event("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": '{"a": 1}'}))
    info = parser.close()
    assert [c.arguments for c in info.tool_calls] == ['{"a":1}']
    assert not info.complete


def test_unparsable_events_are_counted() -> None:
    parser = MessagesStreamParser()
    parser.feed(b"event: message_start\ndata: {oops\n\n")
    assert parser.close().parse_error == "1 unparsable events"
