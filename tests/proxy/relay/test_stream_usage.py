"""`upstreams.inject_stream_usage`: the request asks upstream for usage, and the client's stream carries
none of it, byte for byte what it would have been without the option, however the bytes are split."""

from __future__ import annotations

import orjson
import pytest

from runguard.proxy.relay.stream_usage import MAX_HELD, UsageChunkFilter, with_usage_requested
from tests.e2e import payloads

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-4o-mini"}


def _event(payload: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _chunks(with_usage: bool) -> list[bytes]:
    """A Chat stream as OpenAI sends it: with include_usage, `"usage":null` on every chunk and a last usage chunk."""
    deltas = [{"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}, {}]
    null = {"usage": None} if with_usage else {}
    events = [
        _event({**BASE, "choices": [{"index": 0, "delta": d, "finish_reason": "stop" if not d else None}], **null})
        for d in deltas
    ]
    if with_usage:
        events.append(_event({**BASE, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}))
    return [*events, b"data: [DONE]\n\n"]


def _filtered(data: bytes, cut: int) -> bytes:
    usage_filter = UsageChunkFilter()
    return usage_filter.feed(data[:cut]) + usage_filter.feed(data[cut:]) + usage_filter.flush()


def test_the_request_asks_for_usage_and_keeps_its_other_stream_options() -> None:
    body = orjson.dumps({"model": "m", "stream": True, "stream_options": {"include_obfuscation": False}})
    asked = with_usage_requested(body)
    assert asked is not None
    assert orjson.loads(asked)["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert orjson.loads(with_usage_requested(b'{"stream_options": "odd"}') or b"")["stream_options"] == {
        "include_usage": True
    }


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'"text"'])
def test_a_body_that_is_not_a_json_object_is_left_alone(body: bytes) -> None:
    assert with_usage_requested(body) is None


def test_the_client_gets_the_stream_it_would_have_got_without_the_option_at_every_split() -> None:
    upstream = b"".join(_chunks(with_usage=True))
    expected = b"".join(_chunks(with_usage=False))
    for cut in range(len(upstream) + 1):
        assert _filtered(upstream, cut) == expected, cut


def test_a_stream_that_already_had_no_usage_passes_unchanged() -> None:
    plain = b"".join(_chunks(with_usage=False))
    assert _filtered(plain, len(plain) // 3) == plain


def test_a_chunk_with_choices_and_usage_is_kept() -> None:
    both = _event({**BASE, "choices": [{"index": 0, "delta": {"content": "x"}}], "usage": {"prompt_tokens": 1}})
    assert _filtered(both, 5) == both


def test_crlf_event_ends_are_kept_as_they_came() -> None:
    data = _event({**BASE, "choices": [], "usage": None}).replace(b"\n\n", b"\r\n\r\n")
    assert _filtered(data, 7) == data.replace(b',"usage":null', b"")


def test_an_unterminated_last_event_is_passed_at_the_end() -> None:
    usage_filter = UsageChunkFilter()
    assert usage_filter.feed(b"data: [DONE]") == b""
    assert usage_filter.flush() == b"data: [DONE]"
    assert usage_filter.flush() == b""


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


def test_a_huge_line_passes_as_it_came_and_is_not_held() -> None:
    """100 MB of one line in 64 KB pieces: each piece goes on at once (held and rescanned, it cost quadratic
    time), and the stream's rest passes as it came."""
    rewrite = UsageChunkFilter()
    piece = b"a" * (64 * 1024)
    assert rewrite.feed(b'data: {"choices":[],"usage":null}\n\ndata: {"x":"') == b'data: {"choices":[]}\n\n'
    passed = 0
    for _ in range(1600):
        passed += len(rewrite.feed(piece))
    assert passed >= 1600 * len(piece) - MAX_HELD
    tail = b'"}\n\ndata: {"choices":[],"usage":null}\n\n'
    assert rewrite.feed(tail) == tail and rewrite.flush() == b""
