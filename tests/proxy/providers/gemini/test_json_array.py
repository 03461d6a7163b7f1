"""`WholeElements`: a Gemini JSON-array stream cut anywhere still ends as valid JSON, the error last."""

from __future__ import annotations

import orjson
import pytest

from runguard.proxy.providers.gemini import json_array
from runguard.proxy.providers.gemini.json_array import WholeElements

ERROR = b'{"error":{"code":502,"message":"cut","status":"UNAVAILABLE"}}'
ELEMENTS = [
    {"candidates": [{"content": {"parts": [{"text": 'braces } ] { [ and "quotes", a comma, \\ and \\"'}]}}]},
    {"candidates": [{"content": {"parts": [{"text": "second"}]}}], "usageMetadata": {"totalTokenCount": 7}},
    [1, [2, 3]],
]
# As Gemini sends it: elements separated by a comma and CRLF, a space or two.
ARRAY = b"[" + b"\n,\r\n".join(orjson.dumps(e) for e in ELEMENTS) + b"\n]"


def _cut_at(end: int, piece: int) -> tuple[bytes, WholeElements]:
    """What the client has after ARRAY[:end] arrived in pieces of `piece` bytes."""
    framing = WholeElements()
    sent = b"".join(framing.take(ARRAY[i : min(i + piece, end)]) for i in range(0, end, piece))
    return sent, framing


def test_cut_anywhere_the_client_reads_the_whole_elements_then_the_error() -> None:
    for piece in (1, 7, 64):
        for end in range(len(ARRAY)):
            sent, framing = _cut_at(end, piece)
            elements = orjson.loads(sent + framing.ending(ERROR))
            assert elements[-1] == orjson.loads(ERROR), (piece, end)
            whole = elements[:-1]
            assert whole == ELEMENTS[: len(whole)], (piece, end)
            assert sent + framing.pending == ARRAY[:end]  # nothing lost or reordered, only held back


def test_an_array_that_ended_gets_nothing_spliced_in() -> None:
    sent, framing = _cut_at(len(ARRAY), 5)
    assert sent == ARRAY and framing.ending(ERROR) == b""


def test_a_body_that_is_not_an_array_passes_as_it_comes() -> None:
    framing = WholeElements()
    body = b'{"error": {"code": 400, "message": "not an array"}}'
    assert framing.take(body[:9]) + framing.take(body[9:]) == body
    assert framing.ending(ERROR) == b""


def test_an_element_larger_than_the_limit_stops_the_holding_back() -> None:
    framing = WholeElements(limit=16)
    head = b'[{"text": "' + b"x" * 40
    assert framing.take(head) == head
    assert framing.ending(ERROR) == b""


@pytest.mark.parametrize(
    ("query", "sse"),
    [
        ({"alt": "sse"}, True),  # google-genai
        ({"$alt": "sse"}, True),
        ({"alt": "sse", "key": "k"}, True),
        ({}, False),  # one JSON array
        ({"$alt": "json;enum-encoding=int"}, False),  # google-api-core's REST transport
        ({"alt": "json"}, False),
    ],
)
def test_a_stream_is_sse_only_when_alt_sse_is_asked(query: dict[str, str], sse: bool) -> None:
    assert json_array.streams_sse(query) is sse
    assert json_array.framing(True, query).name == ("sse" if sse else "json_array")
    assert json_array.framing(False, query).name == "sse"  # a whole answer is no stream
