"""Reading Gemini answers: whole, SSE, a JSON array in pieces, an error body on the streaming method."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import Usage
from runguard.proxy.providers.gemini.output import Accumulator, GeminiStreamParser

CHUNKS: list[dict[str, Any]] = [
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}],
        "usageMetadata": {"promptTokenCount": 10},
        "responseId": "r1",
        "modelVersion": "gemini-2.5-flash",
    },
    {
        "candidates": [
            {
                "content": {"parts": [{"text": "lo"}, {"functionCall": {"name": "f", "args": {}}}]},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 4,
            "thoughtsTokenCount": 2,
            "toolUsePromptTokenCount": 1,
            "cachedContentTokenCount": 3,
            "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 5}, {"modality": "TEXT", "tokenCount": 5}],
        },
    },
]
USAGE = Usage(input_tokens=11, output_tokens=6, cached_tokens=3, reasoning_tokens=2, audio_input_tokens=5)


def _read(body: bytes, size: int) -> Any:
    parser = GeminiStreamParser()
    for at in range(0, len(body), size):
        parser.feed(body[at : at + size])
    return parser.close()


def test_chunks_add_up_and_the_last_usage_counts() -> None:
    acc = Accumulator()
    for chunk in CHUNKS:
        acc.add(chunk)
    info = acc.info(complete=True)
    assert (info.text, info.finish_reason, info.response_id, info.model) == ("Hello", "STOP", "r1", "gemini-2.5-flash")
    assert [c.name for c in info.tool_calls] == ["f"]
    assert info.usage == USAGE


def test_sse_and_json_array_streams_read_alike_wherever_they_split() -> None:
    sse = b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in CHUNKS)
    array = orjson.dumps(CHUNKS)
    for body in (sse, array):
        for size in (1, 5, len(body)):
            info = _read(body, size)
            assert (info.text, info.usage, info.complete, info.parse_error) == ("Hello", USAGE, True, None)


def test_a_stream_cut_before_its_finish_is_incomplete() -> None:
    info = _read(orjson.dumps(CHUNKS)[:-40], 7)
    assert info.text == "Hel" and not info.complete


def test_an_error_body_on_the_streaming_method_is_read_at_the_end() -> None:
    error = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    info = _read(b"  " + orjson.dumps(error), 3)
    assert info.error == "quota" and not info.complete


def test_unparsable_chunks_are_counted() -> None:
    info = _read(b"data: {nope\r\n\r\n" + b"data: " + orjson.dumps(CHUNKS[1]) + b"\r\n\r\n", 4)
    assert info.parse_error == "1 unparsable chunks" and info.text == "lo"


def test_a_blocked_prompt_names_its_reason() -> None:
    acc = Accumulator()
    acc.add({"promptFeedback": {"blockReason": "SAFETY"}})
    assert acc.info(complete=True).finish_reason == "SAFETY"
