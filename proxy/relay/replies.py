"""Provider-style errors the proxy itself answers (bad path, too large, upstream down).

They look like the provider's own errors so SDKs raise their usual
exceptions: each provider spec writes its own (`ProviderSpec.error_payload`):
OpenAI `{"error": {"message", "type", "param", "code"}}`, Gemini
`{"error": {"code", "message", "status"}}`.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from runguard.proxy.core.errors import UpstreamError, UpstreamTimeout
from runguard.proxy.core.events import Provider
from runguard.proxy.providers import registry


def error_body(provider: Provider | None, status: int, message: str, code: str) -> bytes:
    """An error in `provider`'s format (its spec's `error_payload`); the first provider's (OpenAI's) when the
    provider is unknown."""
    spec = registry.provider_named(provider) or registry.REGISTRY.providers[0]
    return orjson.dumps(spec.error_payload(status, message, code))


def provider_error(
    provider: Provider | None, status: int, message: str, code: str, headers: dict[str, str] | None = None
) -> web.Response:
    """An error response in the provider's format (OpenAI's when the provider is unknown)."""
    return web.Response(
        status=status,
        body=error_body(provider, status, message, code),
        content_type="application/json",
        headers=headers,
    )


def upstream_failed(provider: Provider, exc: UpstreamError) -> web.Response:
    """What the client gets when the provider could not be reached or did not answer in time."""
    timeout = isinstance(exc, UpstreamTimeout)
    status, code = (504, "upstream_timeout") if timeout else (502, "upstream_unreachable")
    return provider_error(provider, status, f"RunGuard could not get an answer from the provider: {exc}", code)
