"""Claude on Vertex AI (`:rawPredict`, `:streamRawPredict`): Anthropic's Messages bodies, with two differences.

`anthropic_version` is in the body instead of a header, and there is no `model` field: the model (with its
`@date`, `claude-haiku-4-5@20251001`) is in the path, which the route passes on (`RequestContext.path_model`).
Answers, streams and errors are Anthropic's own, so everything else is the Anthropic adapter's.
"""

from __future__ import annotations

import dataclasses

from runguard.proxy.core.events import Api, RequestInfo
from runguard.proxy.providers.anthropic.adapter import AnthropicAdapter
from runguard.proxy.providers.base import RequestContext

VERTEX_CLAUDE = Api("vertex_claude")


class VertexClaudeAdapter(AnthropicAdapter):
    api = VERTEX_CLAUDE

    def parse_request(self, body: bytes, ctx: RequestContext) -> RequestInfo:
        info = super().parse_request(body, ctx)
        if info.model or not ctx.path_model or info.parse_error:
            return info
        return dataclasses.replace(info, model=ctx.path_model)
