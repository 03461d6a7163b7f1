from __future__ import annotations

import orjson

from runguard.proxy.providers.answers import StopNotice
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.vertex.adapter import VertexGeminiAdapter

BODY = orjson.dumps(
    {
        "contents": [{"role": "user", "parts": [{"text": "Extract the invoice total."}]}],
        "systemInstruction": {"parts": [{"text": "You extract data."}]},
        "tools": [{"functionDeclarations": [{"name": "parse_document", "description": "parse"}]}],
    }
)
# A Vertex AI answer: Gemini's fields, and Vertex's own (`createTime`, `responseId`, usage by modality).
ANSWER = orjson.dumps(
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "42 EUR"}]}, "finishReason": "STOP"}],
        "usageMetadata": {
            "promptTokenCount": 11,
            "candidatesTokenCount": 3,
            "totalTokenCount": 14,
            "trafficType": "ON_DEMAND",
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 11}],
        },
        "modelVersion": "gemini-2.5-flash",
        "createTime": "2026-12-06T04:00:00.000000Z",
        "responseId": "vtx-1",
    }
)


def test_it_reads_vertex_bodies_as_gemini_does_under_vertex_s_names() -> None:
    ours, gemini = VertexGeminiAdapter(), GeminiAdapter()
    context = RequestContext(path_model="gemini-2.5-flash")
    info = ours.parse_request(BODY, context)
    assert (ours.provider, ours.api, info.api) == ("vertex", "vertex_gemini", "vertex_gemini")
    assert info.model == "gemini-2.5-flash" and info.tool_names == ("parse_document",)
    assert info.root_hash == gemini.parse_request(BODY, context).root_hash is not None
    seen = ours.parse_response(ANSWER)
    assert seen.text == "42 EUR" and seen.usage is not None and seen.usage.input_tokens == 11


def test_its_stop_is_a_gemini_answer() -> None:
    adapter = VertexGeminiAdapter()
    info = adapter.parse_request(BODY, RequestContext(path_model="gemini-2.5-flash"))
    answer = adapter.stop_response(StopNotice("non_progress", "run-1", "the same result three times"), info)
    assert answer is not None and answer.status == 200
    assert "non_progress" in orjson.loads(answer.body)["candidates"][0]["content"]["parts"][0]["text"]
