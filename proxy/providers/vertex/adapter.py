"""Gemini on Vertex AI: Vertex AI's Gemini API reads and writes the same bodies as the Gemini Developer API
(`generateContent`, `streamGenerateContent`, SSE or one JSON array), so its adapter is Gemini's, with its
records and metrics labelled Vertex (`vertex`, `vertex_gemini`)."""

from __future__ import annotations

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.gemini.adapter import GeminiAdapter, GeminiArrayAdapter

VERTEX = Provider("vertex")
VERTEX_GEMINI = Api("vertex_gemini")


class VertexGeminiAdapter(GeminiAdapter):
    provider = VERTEX
    api = VERTEX_GEMINI

    def arrayed(self) -> GeminiAdapter:
        return VertexGeminiArrayAdapter()


class VertexGeminiArrayAdapter(GeminiArrayAdapter):
    """Vertex AI's Gemini stream framed as one JSON array (`json_array.JSON_ARRAY`)."""

    provider = VERTEX
    api = VERTEX_GEMINI
