"""Vertex AI as a provider (its upstream, its doors) and its Gemini API as a spec.

Its doors (`spec.Door`): the SDKs' own Vertex paths under the proxy's root, `/v1/projects/{p}/locations/{l}/`
and `/v1beta1/...` (google-genai with `vertexai=True`, Google ADK on Vertex, AnthropicVertex on a base URL
ending in `/v1`), express mode's `/v1/publishers/...` and `/v1beta1/publishers/...` (an API key, no project),
and `/projects/{p}/locations/{l}/publishers/anthropic/...` (AnthropicVertex on the proxy's root). Any other
`/v1/projects/...` or `/v1/publishers/...` path (a location that is no host name) is refused: it is nobody's.

Two APIs read its paths: Gemini models (`publishers/google`: `generateContent`, `streamGenerateContent`),
read as Gemini's API and answered in Google's format (`SPEC`, here); Claude models (`publishers/anthropic`:
`rawPredict`, `streamRawPredict`), read as Anthropic's Messages API and answered in Anthropic's format
(`vertex_claude/`). Other methods (`countTokens`, Claude's `count-tokens:rawPredict`) are forwarded and
only counted.

Credentials are an OAuth access token (`Authorization: Bearer`, rotated hourly) or, in express mode, an API
key (`x-goog-api-key`). A request acts for the project its path names once a token is proven valid for it
(`account`, `runs.accounts`): see docs/security.md.
"""

from __future__ import annotations

import re

from runguard.proxy.providers.gemini import json_array, nudge, transcript
from runguard.proxy.providers.gemini.spec import block_status, error_payload
from runguard.proxy.providers.spec import CredentialPlaces, Door, PathRule, ProviderApi, ProviderSpec, UpstreamSetting
from runguard.proxy.providers.vertex import paths
from runguard.proxy.providers.vertex.adapter import VERTEX, VERTEX_GEMINI, VertexGeminiAdapter

VERTEX_FAMILY = "vertex"


def _door(pattern: str, *, refuse: bool = False) -> Door:
    return Door(re.compile(pattern), VERTEX_FAMILY, refuse=refuse, model=paths.ANY_MODEL)


PROVIDER = ProviderSpec(
    name=VERTEX,
    upstream=UpstreamSetting("vertex", paths.DEFAULT_BASE, "RUNGUARD_VERTEX_UPSTREAM", locate=paths.upstream_url),
    # An OAuth token, or express mode's API key; Google's system parameters in the query.
    credentials=CredentialPlaces(("Authorization", "x-goog-api-key"), ("key", "$key", "access_token", "oauth_token")),
    doors=(
        _door(r"^/v1(?:beta1)?/projects/[a-z0-9][a-z0-9-]{0,62}/locations/[a-z][a-z0-9-]{0,62}/"),
        _door(r"^/v1(?:beta1)?/publishers/"),
        _door(r"^/projects/[a-z0-9][a-z0-9-]{0,62}/locations/[a-z][a-z0-9-]{0,62}/publishers/anthropic/"),
        _door(r"^/v1(?:beta1)?/(?:projects|publishers)(?:/|$)", refuse=True),
    ),
    error_payload=error_payload,
    block_status=block_status,
    telemetry_name="gcp.vertex_ai",
    title="Vertex AI",
    account=paths.project,
)

SPEC = ProviderApi(
    name=VERTEX_GEMINI,
    provider=PROVIDER,
    adapter=VertexGeminiAdapter,
    paths=(PathRule(VERTEX_FAMILY, paths.GEMINI, streaming=frozenset({"streamGenerateContent"})),),
    nudge=nudge.with_note,
    operation="generate_content",
    framing=json_array.framing,
    transcript=transcript.transcript,
)
