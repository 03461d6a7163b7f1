"""Opt-in exact usage for streamed Chat: the request asks for it, the client's copy hides what it did not ask for."""

from __future__ import annotations

import orjson

from runguard.proxy.relay.stream_usage import UsageChunkFilter, with_usage_requested
from tests.e2e import payloads


def test_the_body_asks_for_usage_keeping_its_other_stream_options() -> None:
    asked = with_usage_requested(b'{"model": "m", "stream": true, "stream_options": {"other": 1}}')
    assert asked is not None
    assert orjson.loads(asked)["stream_options"] == {"other": 1, "include_usage": True}
    plain = with_usage_requested(b'{"model": "m", "stream_options": "odd"}')
    assert plain is not None and orjson.loads(plain)["stream_options"] == {"include_usage": True}
    assert with_usage_requested(b"[1, 2]") is None
    assert with_usage_requested(b"not json") is None


def _with_null_usage(chunks: list[bytes]) -> list[bytes]:
    """The chunks as OpenAI sends them once usage is asked for: `"usage":null` on each, then the usage chunk."""
    return [c.replace(b'"finish_reason":null}]', b'"finish_reason":null}],"usage":null') for c in chunks]


def test_the_usage_only_chunk_and_the_null_usages_are_hidden_whatever_the_splits() -> None:
    asked = b"".join(_with_null_usage(payloads.chat_stream("Hello there!", with_usage=True)))
    expected = b"".join(payloads.chat_stream("Hello there!", with_usage=False))
    assert b'"usage":null' in asked
    for size in (1, 7, 64, len(asked)):
        rewrite = UsageChunkFilter()
        out = b"".join(rewrite.feed(asked[i : i + size]) for i in range(0, len(asked), size)) + rewrite.flush()
        assert b'"usage"' not in out, size
        assert out.count(b"data:") == expected.count(b"data:"), size


def test_an_unterminated_event_is_passed_as_it_came_at_the_end() -> None:
    rewrite = UsageChunkFilter()
    assert rewrite.feed(b'data: {"choices": []') == b""
    assert rewrite.flush() == b'data: {"choices": []'
    assert rewrite.flush() == b""
