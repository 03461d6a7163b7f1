"""SSE framing: line endings, multi-line data, comments, unterminated tails, any split."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runguard.proxy.providers.common.sse import SseEvent, SseSplitter


def events_of(*chunks: bytes) -> list[SseEvent]:
    splitter = SseSplitter()
    found = [event for chunk in chunks for event in splitter.feed(chunk)]
    return found + splitter.rest()


def test_lf_framing() -> None:
    assert events_of(b'data: {"a":1}\n\ndata: [DONE]\n\n') == [SseEvent(None, b'{"a":1}'), SseEvent(None, b"[DONE]")]


def test_crlf_framing() -> None:
    assert events_of(b"data: one\r\n\r\ndata: two\r\n\r\n") == [SseEvent(None, b"one"), SseEvent(None, b"two")]


def test_event_names_and_mixed_line_endings() -> None:
    found = events_of(b"event: response.created\r\ndata: {}\n\nevent: response.completed\ndata: {}\r\n\r\n")
    assert found == [SseEvent("response.created", b"{}"), SseEvent("response.completed", b"{}")]


def test_multi_line_data_is_joined_with_lf() -> None:
    assert events_of(b'data: {"error":\r\ndata:  {"code": 500}}\r\n\r\n') == [
        SseEvent(None, b'{"error":\n {"code": 500}}')
    ]


def test_comments_and_unknown_fields_are_ignored() -> None:
    found = events_of(b": keep-alive\n\nid: 7\nretry: 100\n:comment\ndata: x\n\n")
    assert found == [SseEvent(None, b"x")]


def test_an_event_without_data_is_not_dispatched() -> None:
    assert events_of(b"event: ping\n\ndata: x\n\n") == [SseEvent(None, b"x")]


def test_data_without_space_or_value() -> None:
    assert events_of(b"data:x\n\ndata\n\n") == [SseEvent(None, b"x"), SseEvent(None, b"")]


@pytest.mark.parametrize("tail", [b"data: last", b"data: last\n", b"data: last\r\n", b"data: last\r"])
def test_no_final_blank_line(tail: bytes) -> None:
    assert events_of(b"data: first\n\n" + tail) == [SseEvent(None, b"first"), SseEvent(None, b"last")]


def test_rest_is_empty_after_a_clean_end() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b"data: a\n\n") == [SseEvent(None, b"a")]
    assert splitter.rest() == []


def test_byte_order_mark_at_the_start() -> None:
    assert events_of(b"\xef\xbb\xbfdata: a\n\n") == [SseEvent(None, b"a")]


def test_cr_and_lf_split_across_chunks() -> None:
    assert events_of(b"data: a\r", b"\n\r", b"\n") == [SseEvent(None, b"a")]


def test_invalid_utf8_in_event_name_does_not_raise() -> None:
    assert events_of(b"event: \xff\xfe\ndata: a\n\n") == [SseEvent("\ufffd\ufffd", b"a")]


STREAM = (
    b": hello\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\n"
    b'data: {"x": "\xc3\xa9"}\n\nevent: b\ndata:3\n\n\n\ndata: tail\r\n'
)


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(0, len(STREAM)), max_size=30))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted({0, len(STREAM), *cuts})
    pieces = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert events_of(*pieces) == events_of(STREAM)


# Streams as models send them (whole events of one `data: ` line, or `event: ` and `data: `; LF or CRLF,
# as Gemini sends), which the splitter cuts at their blank lines at once, and what must leave that path.
MODEL_STREAMS = [
    b'data: {"a":1}\n\ndata: {"b":"\xc3\xa9"}\n\ndata: [DONE]\n\n',
    b'event: response.created\ndata: {}\n\nevent: response.output_text.delta\ndata: {"d":1}\n\n',
    b'data: {"a":1}\r\n\r\ndata: {"b":2}\r\n\r\nevent: x\r\ndata: 3\r\n\r\n',
    b"data: one\n\ndata: two\ndata: more\n\nevent: e\ndata: 1\ndata: 2\n\n: keep-alive\n\ndata:x\n\ndata\n\n",
    b"data: one\n\n\n\nevent: a\n\ndata: two\n\nevent: b\nid: 1\ndata: three\n\nevent:\xff\ndata: 4\n\n",
    b"data: one\r\n\r\ndata: two\n\ndata: three\r\n\r\ndata: four\r\rdata: five\n\n",
    b"\xef\xbb\xbfdata: bom\n\ndata: unfinished",
    b"event: only a name\n\ndata: after\n\ndata: tail without its blank line\n",
]


@pytest.mark.parametrize("stream", MODEL_STREAMS)
def test_whole_events_read_at_once_as_line_by_line(stream: bytes) -> None:
    """Fed whole (its events cut at once), byte by byte (line by line), or in any two pieces: the same events."""
    whole = events_of(stream)
    assert whole == events_of(*(stream[i : i + 1] for i in range(len(stream))))
    for cut in range(len(stream)):
        assert events_of(stream[:cut], stream[cut:]) == whole, cut


def test_model_streams_read_as_the_spec_says() -> None:
    assert events_of(MODEL_STREAMS[1]) == [
        SseEvent("response.created", b"{}"),
        SseEvent("response.output_text.delta", b'{"d":1}'),
    ]
    assert events_of(MODEL_STREAMS[2]) == [SseEvent(None, b'{"a":1}'), SseEvent(None, b'{"b":2}'), SseEvent("x", b"3")]
    assert events_of(MODEL_STREAMS[4]) == [
        SseEvent(None, b"one"),
        SseEvent(None, b"two"),
        SseEvent("b", b"three"),
        SseEvent("\ufffd", b"4"),
    ]


def test_a_huge_line_fed_in_small_pieces_arrives_whole() -> None:
    """3 MB of one `data:` line in 64-byte pieces (bench/ measures that this stays linear)."""
    line = b"data: " + b"x" * (3 << 20) + b"\n\n"
    splitter = SseSplitter()
    found = [event for i in range(0, len(line), 64) for event in splitter.feed(line[i : i + 64])]
    assert [len(event.data) for event in found] == [3 << 20]
    assert not splitter.overflowed


def test_a_line_beyond_the_limit_skips_its_event_and_the_next_events_are_read() -> None:
    splitter = SseSplitter(limit=1000)
    assert splitter.feed(b"data: first\n\ndata: " + b"x" * 600) == [SseEvent(None, b"first")]
    assert not splitter.overflowed
    assert splitter.feed(b"x" * 600) == []
    assert splitter.skipped == 1
    assert splitter.feed(b"x" * 100_000) == []  # the rest of the line is passed over, not held
    assert splitter.feed(b"x" * 500 + b"\n\ndata: small\n\n") == [SseEvent(None, b"small")]
    assert splitter.rest() == [] and splitter.skipped == 1


def test_a_too_large_event_that_arrives_whole_is_skipped_too() -> None:
    splitter = SseSplitter(limit=1000)
    chunk = b"data: a\n\ndata: " + b"x" * 2000 + b"\n\nevent: e\ndata: " + b"y" * 2000 + b"\n\ndata: b\n\n"
    assert splitter.feed(chunk) == [SseEvent(None, b"a"), SseEvent(None, b"b")]
    assert splitter.skipped == 2


def test_an_event_of_many_lines_beyond_the_limit_is_skipped() -> None:
    splitter = SseSplitter(limit=1000)
    found = [event for _ in range(20) for event in splitter.feed(b"data: " + b"y" * 99 + b"\n")]
    found += splitter.feed(b"\ndata: after\n\n")
    assert found == [SseEvent(None, b"after")] and splitter.skipped == 1


def test_an_unterminated_overlong_line_at_the_end_gives_nothing() -> None:
    splitter = SseSplitter(limit=1000)
    splitter.feed(b"data: " + b"z" * 5000)
    assert splitter.rest() == [] and splitter.skipped == 1


def test_events_below_the_limit_never_overflow() -> None:
    splitter = SseSplitter(limit=1000)
    chunk = b"data: " + b"z" * 900 + b"\n\n"
    found = [event for _ in range(50) for event in splitter.feed(chunk)]
    assert len(found) == 50
    assert not splitter.overflowed


def reference_events(stream: bytes) -> list[SseEvent]:
    """The SSE spec's reading, written plainly: lines end in LF or CRLF, a field's name is what precedes the
    first colon and one space after the colon is dropped, a blank line dispatches, an unterminated end ends."""
    stream = stream.removeprefix(b"\xef\xbb\xbf")
    lines = stream.split(b"\n")
    lines = [line.removesuffix(b"\r") for line in lines[:-1]] + [lines[-1].removesuffix(b"\r"), b""]
    found: list[SseEvent] = []
    data: list[bytes] = []
    name: str | None = None
    for line in lines:
        if not line:
            if data:
                found.append(SseEvent(name, b"\n".join(data)))
            data, name = [], None
            continue
        field, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace")
    return found


_LINES = st.sampled_from(
    [
        b'data: {"x": 1}',
        b"data:no-space",
        b"data:  two spaces",
        b"data",
        b"data:",
        b"data : not data",
        b"datax: not data",
        b"event: delta",
        b"event:",
        b"event",
        b"event:\xff\xfe",
        b": a comment",
        b"id: 7",
        b"retry: 100",
        b"",
        b"data: caf\xc3\xa9 \r inner CR",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(st.tuples(_LINES, st.sampled_from([b"\n", b"\r\n"])), max_size=25),
    bom=st.booleans(),
    tail=st.sampled_from([b"", b"data: unterminated", b"data: cr at the end\r", b"\r"]),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
)
def test_every_split_of_any_stream_reads_as_the_spec_says(
    lines: list[tuple[bytes, bytes]], bom: bool, tail: bytes, cuts: list[int]
) -> None:
    stream = (b"\xef\xbb\xbf" if bom else b"") + b"".join(line + end for line, end in lines) + tail
    points = sorted({0, len(stream), *(cut for cut in cuts if cut < len(stream))})
    pieces = [stream[a:b] for a, b in itertools.pairwise(points)]
    assert events_of(*pieces) == reference_events(stream)


def test_a_parser_s_shared_start_hands_on_objects_counts_the_unreadable_and_reads_the_tail() -> None:
    from typing import Any

    from runguard.proxy.providers.common.sse import SseObjects

    class Objects(SseObjects):
        DONE = b"[DONE]"

        def __init__(self) -> None:
            super().__init__()
            self.taken: list[dict[str, Any]] = []

        def take(self, payload: dict[str, Any]) -> None:
            self.taken.append(payload)

    parser = Objects()
    parser.feed(b'data: {"a": 1}\n\ndata: not json\n\ndata: [1]\n\ndata: [DONE]\n\ndata: {"b"')
    parser.feed(b": 2}")
    assert (parser.taken, parser.done, parser.unparsable) == ([{"a": 1}], True, "1 unparsable events")
    parser.rest()  # the unterminated last event
    assert parser.taken == [{"a": 1}, {"b": 2}]
    assert Objects().unparsable is None
