"""Named OpenAI-compatible upstreams (`upstreams.compatible.<name>`): OpenRouter, Groq, vLLM, Ollama, ...

Each is reached at its own base URL prefix, `http://HOST:PORT/<name>/v1`, and guarded like OpenAI. Its
`url` is the service's base URL without its `/v1` (one given with it is taken without it); its `prices`,
USD per million tokens by model name, price its models: a model its table does not name is unpriced
(recorded and shown as such, never as $0), and its token and step caps still hold.

A name must not shadow a path the proxy serves (`v1`, `openai`, `gemini`, `runguard`, ...): such a name
is refused at load, with the key it was given under.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# First path segments the proxy's own routes use (providers' prefixes and API versions, Vertex AI's, the
# admin API's), and any segment that reads as an API version (`v1`, `v2beta`).
RESERVED = frozenset(
    {"openai", "gemini", "anthropic", "vertex", "runguard", "projects", "publishers", "upload", "ws", "compatible"}
)
_VERSION = re.compile(r"^v\d")


class ModelPrice(BaseModel):
    """A model's price on a compatible upstream, USD per 1M tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="USD per 1M input tokens.")
    output: float = Field(ge=0, description="USD per 1M output tokens.")
    cached_input: float | None = Field(None, ge=0, description="USD per 1M cached input tokens (default: input).")


class CompatibleUpstream(BaseModel):
    """One OpenAI-compatible service, reached at `http://HOST:PORT/<name>/v1`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="Base URL of the service without its /v1 (https://api.groq.com/openai).")
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="USD per 1M tokens by model name; a model not named here is unpriced (caps still hold).",
    )

    @field_validator("url")
    @classmethod
    def _without_v1(cls, url: str) -> str:
        url = url.rstrip("/")
        return url.removesuffix("/v1") if url.endswith("/v1") else url


def check_names(upstreams: dict[str, CompatibleUpstream]) -> dict[str, CompatibleUpstream]:
    """`upstreams` if every name is a plain path segment the proxy does not already serve; else a ValueError
    that names the key."""
    for name in upstreams:
        key = f"upstreams.compatible.{name}"
        if not _NAME.match(name):
            raise ValueError(f"{key}: a name is lower-case letters, digits, '_' and '-' (it is a URL path segment)")
        if name in RESERVED or _VERSION.match(name):
            raise ValueError(f"{key}: the name {name!r} would shadow the proxy's own /{name}/ paths; choose another")
    return upstreams
