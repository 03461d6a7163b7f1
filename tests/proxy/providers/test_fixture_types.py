"""The hand-written fixtures (`fixtures/`) checked against the providers' own SDK types.

The cases are written by hand after the wire formats (docs: wire-formats), not captured from a provider; where
a provider's SDK ships typed models of its format, every body and stream event a case holds must validate
against them, so a case cannot drift from what the SDK reads: OpenAI's `ChatCompletion`, `ChatCompletionChunk`,
`Response` and its stream events, and their request parameters (openai); Anthropic's `Message`, its raw stream
events and its request parameters (anthropic); Gemini's `GenerateContentResponse`, which forbids unknown
fields (google-genai). An error a stream or body carries instead is checked against the SDK's error type
(OpenAI's `ErrorObject`, Anthropic's `ErrorResponse`) or, for Gemini whose SDK reads it as a plain dict, against
the shape its `APIError` reads. Gemini's request bodies (REST `generateContent`) have no SDK type and are not
checked here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic.types as anthropic_types
import pytest
from google.genai import types as genai_types
from openai.types import chat, responses
from openai.types.shared import ErrorObject
from pydantic import TypeAdapter

from runguard.proxy.providers.common.jsonish import JsonArrayItems
from runguard.proxy.providers.common.sse import SseSplitter

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
CASES = sorted(path for path in FIXTURES.glob("*/*") if (path / "expected.json").is_file())

_TYPES: dict[str, tuple[Any, Any, Any]] = {  # folder: (whole response, stream event, request) validators
    "openai_chat": (
        TypeAdapter(chat.ChatCompletion),
        TypeAdapter(chat.ChatCompletionChunk),
        TypeAdapter(chat.completion_create_params.CompletionCreateParams),
    ),
    "openai_responses": (
        TypeAdapter(responses.Response),
        TypeAdapter(responses.ResponseStreamEvent),
        TypeAdapter(responses.response_create_params.ResponseCreateParams),
    ),
    "anthropic": (
        TypeAdapter(anthropic_types.Message),
        TypeAdapter(anthropic_types.RawMessageStreamEvent),
        TypeAdapter(anthropic_types.message_create_params.MessageCreateParams),
    ),
    "gemini": (
        TypeAdapter(genai_types.GenerateContentResponse),
        TypeAdapter(genai_types.GenerateContentResponse),
        None,
    ),
}
# Vertex AI's Gemini reads and writes Gemini's bodies; Claude on Vertex Anthropic's, its request without
# `model` (in the path) and with `anthropic_version` in the body, which the SDK's create params do not type.
_TYPES["vertex"] = _TYPES["gemini"]
_TYPES["vertex_claude"] = (*_TYPES["anthropic"][:2], None)
_FORMAT = {"vertex": "gemini", "vertex_claude": "anthropic"}  # folder -> the format its bodies are in
_ERROR = TypeAdapter(ErrorObject)
_ANTHROPIC_ERROR = TypeAdapter(anthropic_types.ErrorResponse)


def _events(case: Path) -> list[dict[str, Any]]:
    """The objects a case's stream carries: SSE events' data, the whole elements of a JSON array, or one bare
    object (an error body sent on a streaming method)."""
    raw = (case / "stream.sse").read_bytes()
    if raw.lstrip().startswith(b"{"):
        return [json.loads(raw)]
    if raw.lstrip().startswith(b"["):
        items = JsonArrayItems()
        return [json.loads(item) for item in items.feed(raw)]
    splitter = SseSplitter()
    data = [event.data for event in (*splitter.feed(raw), *splitter.rest())]
    return [json.loads(item) for item in data if not item.startswith(b"[DONE]")]


def _check(folder: str, validator: Any, value: dict[str, Any]) -> None:
    """`value` is what `validator` reads, or an error in the provider's error shape."""
    folder = _FORMAT.get(folder, folder)
    if folder == "anthropic" and value.get("type") == "ping":
        return  # Anthropic's keep-alive: the SDK skips it (no type models it)
    if folder == "anthropic" and value.get("type") == "error":
        _ANTHROPIC_ERROR.validate_python(value)
    elif folder in ("openai_chat", "openai_responses") and set(value) == {"error"}:
        _ERROR.validate_python(value["error"])
    elif folder == "gemini" and set(value) == {"error"}:
        error = value["error"]
        assert set(error) <= {"code", "message", "status", "details"}, error
        assert isinstance(error["code"], int) and isinstance(error["message"], str)
    else:
        validator.validate_python(value)


@pytest.mark.parametrize("case", CASES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_case_is_what_its_provider_s_sdk_reads(case: Path) -> None:
    folder = case.parent.name
    whole, event, request = _TYPES[folder]
    if (case / "response.json").is_file():
        _check(folder, whole, json.loads((case / "response.json").read_text()))
    if (case / "stream.sse").is_file():
        events = _events(case)
        assert events, "a stream with no event"
        for value in events:
            _check(folder, event, value)
    if request is not None and (case / "request.json").is_file():
        request.validate_python(json.loads((case / "request.json").read_text()))


def test_every_provider_s_folder_is_checked_and_a_drifted_case_fails() -> None:
    assert {case.parent.name for case in CASES} == set(_TYPES)
    drifted = {"candidates": [{"content": {"parts": [{"txt": "a misspelt field"}]}}]}
    with pytest.raises(ValueError, match="txt"):
        _check("gemini", _TYPES["gemini"][0], drifted)
    with pytest.raises(ValueError, match="choices"):
        _check("openai_chat", _TYPES["openai_chat"][0], {"id": "x", "object": "chat.completion"})
