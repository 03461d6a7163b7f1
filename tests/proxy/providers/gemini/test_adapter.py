"""Gemini's tool results keep the JSON value they were sent as, beside its text."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runguard.proxy.core.events import ToolResult
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.gemini.adapter import GeminiAdapter


def _new_results(response_part: dict[str, Any]) -> tuple[ToolResult, ...]:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "read the config"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a.yaml"}}}]},
            {"role": "user", "parts": [response_part]},
        ]
    }
    info = GeminiAdapter().parse_request(orjson.dumps(body), RequestContext("gemini-2.5-flash"))
    assert info.parse_error is None
    return info.new_results


@pytest.mark.parametrize("key", ["functionResponse", "function_response"])
def test_an_object_result_keeps_its_value_and_its_compact_text(key: str) -> None:
    response = {"result": {"text": "port: 8080", "lines": [1, 2]}, "request_id": "r-9"}
    (result,) = _new_results({key: {"name": "read_file", "response": response}})
    assert result.name == "read_file"
    assert result.value == response
    assert result.content == orjson.dumps(response).decode()


def test_a_result_sent_as_text_has_no_value() -> None:
    (result,) = _new_results({"functionResponse": {"name": "read_file", "response": "port: 8080"}})
    assert result.value is None
    assert result.content == "port: 8080"


@pytest.mark.parametrize(
    ("details", "heard"),
    [
        ([{"modality": "TEXT", "tokenCount": 40}, {"modality": "AUDIO", "tokenCount": 960}], 960),
        ([{"modality": "TEXT", "tokenCount": 1000}], 0),
        ("AUDIO", 0),  # not a breakdown: read as none
        ([None, {"modality": "AUDIO"}], 0),
    ],
)
def test_a_response_s_audio_input_tokens_come_from_its_modality_breakdown(details: Any, heard: int) -> None:
    usage = {"promptTokenCount": 1000, "candidatesTokenCount": 20, "promptTokensDetails": details}
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}}], "usageMetadata": usage}
    info = GeminiAdapter().parse_response(orjson.dumps(body))
    assert info.usage is not None and (info.usage.input_tokens, info.usage.audio_input_tokens) == (1000, heard)


def test_a_response_s_cached_audio_tokens_come_from_its_cache_breakdown() -> None:
    usage = {
        "promptTokenCount": 1000,
        "candidatesTokenCount": 20,
        "cachedContentTokenCount": 900,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 100}, {"modality": "AUDIO", "tokenCount": 900}],
        "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 50}, {"modality": "AUDIO", "tokenCount": 850}],
    }
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}}], "usageMetadata": usage}
    info = GeminiAdapter().parse_response(orjson.dumps(body))
    assert info.usage is not None and (info.usage.cached_tokens, info.usage.cached_audio_tokens) == (900, 850)
