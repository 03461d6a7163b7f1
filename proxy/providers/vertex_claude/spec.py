"""Claude on Vertex AI as a spec: Vertex AI's `publishers/anthropic` paths, read as Anthropic's Messages API.

Its paths come through Vertex AI's doors (`vertex/spec.py`: the door's provider, `vertex`, is where they are
sent); its answers and errors are Anthropic's (`provider`: whose format its clients read), so AnthropicVertex
raises its usual exceptions. Streams are SSE, told by the body's `stream` (never one JSON array).
"""

from __future__ import annotations

from runguard.proxy.providers.anthropic import nudge, transcript
from runguard.proxy.providers.anthropic.spec import PROVIDER as ANTHROPIC
from runguard.proxy.providers.spec import PathRule, ProviderApi
from runguard.proxy.providers.vertex import paths
from runguard.proxy.providers.vertex.spec import VERTEX_FAMILY
from runguard.proxy.providers.vertex_claude.adapter import VERTEX_CLAUDE, VertexClaudeAdapter

SPEC = ProviderApi(
    name=VERTEX_CLAUDE,
    provider=ANTHROPIC,
    adapter=VertexClaudeAdapter,
    paths=(PathRule(VERTEX_FAMILY, paths.CLAUDE),),
    nudge=nudge.with_note,
    transcript=transcript.transcript,
)
