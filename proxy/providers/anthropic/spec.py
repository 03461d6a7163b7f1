"""Anthropic as a provider (its upstream, its doors) and its Messages API (`POST /v1/messages`) as a spec.

Anthropic's paths begin with `/v1/`, as OpenAI's do, so the path alone cannot tell them apart; a key
header cannot either (the SDK sends `Authorization: Bearer` for an API key, other clients `x-api-key`).
What every Anthropic client sends is `anthropic-version`: a request that carries it is Anthropic's
whatever its path (`Tier.MARKED`, before every other door), so a Claude client's key never reaches
another provider's upstream; a path under `/anthropic/` is Anthropic's too, forwarded without that
prefix. A bare `/v1/messages` without the header stays OpenAI's, as it was: an OpenAI client that strays
there must not have its key sent to Anthropic either. Every other Anthropic path (`count_tokens`,
`/v1/models`, batches, files) is forwarded and only counted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runguard.proxy.providers.anthropic import nudge, transcript
from runguard.proxy.providers.anthropic.adapter import ANTHROPIC, MESSAGES, AnthropicAdapter
from runguard.proxy.providers.anthropic.replies import error_object
from runguard.proxy.providers.spec import (
    CredentialPlaces,
    Door,
    PathRule,
    ProviderApi,
    ProviderSpec,
    Tier,
    UpstreamSetting,
)

ANTHROPIC_FAMILY = "anthropic"
VERSION_HEADER = "header:anthropic-version"  # a door fact: the request carries `anthropic-version`


def error_payload(status: int, message: str, code: str) -> Mapping[str, Any]:
    """An error as Anthropic writes them: the SDK raises its usual exception for the status."""
    return error_object(status, f"{message} ({code})")


PROVIDER = ProviderSpec(
    name=ANTHROPIC,
    upstream=UpstreamSetting("anthropic", "https://api.anthropic.com", "RUNGUARD_ANTHROPIC_UPSTREAM"),
    credentials=CredentialPlaces(("Authorization", "x-api-key")),
    doors=(
        Door(re.compile(r"^/anthropic(?:/|$)"), ANTHROPIC_FAMILY, strip="/anthropic", tier=Tier.MARKED),
        Door(re.compile(r"^/"), ANTHROPIC_FAMILY, tier=Tier.MARKED, needs=frozenset({VERSION_HEADER})),
    ),
    error_payload=error_payload,
    telemetry_name="anthropic",
)

SPEC = ProviderApi(
    name=MESSAGES,
    provider=PROVIDER,
    adapter=AnthropicAdapter,
    paths=(PathRule(ANTHROPIC_FAMILY, re.compile(r"^/v1/messages/*$")),),
    nudge=nudge.with_note,
    chains_responses=True,  # message threads: `thread.previous_message_id` continues from a message's id
    transcript=transcript.transcript,
)
