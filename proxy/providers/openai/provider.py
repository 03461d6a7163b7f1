"""OpenAI as an upstream: the provider both OpenAI APIs (Chat, Responses) and Azure OpenAI are sent to.

Its doors (`spec.Door`): `/openai/v1/...` names it explicitly and is forwarded without that prefix; any
other `/openai/...` path, or one with an `api-version`, is Azure OpenAI's and keeps its prefix upstream
(`/openai/deployments/{deployment}/chat/completions?api-version=...` is the `AzureOpenAI` client's: OpenAI
serves nothing but `/openai/v1/...`); bare `/v1/...` is OpenAI's when no other provider claims it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runguard.proxy.core.events import Provider
from runguard.proxy.providers.spec import CredentialPlaces, Door, ProviderSpec, Tier, UpstreamSetting

OPENAI_FAMILY = "openai"  # the paths of OpenAI's own API (`/v1/...`)
AZURE_FAMILY = "azure"  # Azure OpenAI's classic paths, read by their last segments
BROWSER_KEY_PROTOCOL = "openai-insecure-api-key."  # the Realtime API's subprotocol for a key in a browser
# The tiktoken encodings (wire-formats.md F): cl100k for the GPT-4 / 3.5 generation, o200k for everything newer.
_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5")


def error_payload(status: int, message: str, code: str) -> Mapping[str, Any]:
    """An error as OpenAI writes them: the SDKs raise their usual exception for its status."""
    return {"error": {"message": message, "type": "runguard_proxy_error", "param": None, "code": code}}


def encoding(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model; None for models tiktoken does not cover (a Gemini model
    behind Gemini's OpenAI-compatible Chat)."""
    name = model.lower().removeprefix("openai/")
    if name.startswith("gemini") or name.startswith("models/"):
        return None
    if name == "gpt-4" or name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "o200k_base"


OPENAI = ProviderSpec(
    name=Provider.OPENAI,
    title="OpenAI",
    client_path="/v1",
    upstream=UpstreamSetting("openai", "https://api.openai.com", "RUNGUARD_OPENAI_UPSTREAM"),
    # `Authorization` (Bearer; an OpenAI upstream may be an Azure resource, which also reads an Entra ID
    # token there) and `api-key` (Azure's key header).
    credentials=CredentialPlaces(("Authorization", "api-key"), subprotocol=BROWSER_KEY_PROTOCOL),
    doors=(
        Door(re.compile(r"^/openai/"), AZURE_FAMILY, tier=Tier.PREFIX, needs=frozenset({"api_version"})),
        Door(re.compile(r"^/openai/v1/"), OPENAI_FAMILY, strip="/openai", tier=Tier.PREFIX),
        Door(re.compile(r"^/openai/"), AZURE_FAMILY, tier=Tier.PREFIX),
        Door(re.compile(r"^/v1(?:/|$)"), OPENAI_FAMILY, tier=Tier.DEFAULT),
    ),
    error_payload=error_payload,
)
