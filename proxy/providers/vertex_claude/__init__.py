"""vertex_claude: Claude on Vertex AI's spec (`SPEC`), what the registry lists."""

from runguard.proxy.providers.vertex_claude.spec import SPEC

__all__ = ["SPEC"]
