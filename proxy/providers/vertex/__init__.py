"""vertex: Vertex AI as a provider and its Gemini API's spec (`SPEC`), what the registry lists."""

from runguard.proxy.providers.vertex.spec import SPEC

__all__ = ["SPEC"]
