"""Gemini as a provider (its upstream, its doors) and its native API (`generateContent`) as a spec.

Its doors (`spec.Door`): `/gemini/...` names it explicitly and is forwarded without that prefix;
`/v1beta/...`, `/v1alpha/...`, `/v1/models/{m}:method` (its v1 surface), `/upload/...` (google-genai's
`files.upload` sends both of its steps there, on the client's base URL) and `/ws/...` (its Live API's
WebSocket) are its own; any other `/v1/...` request is Gemini's when it carries a Gemini API key
(google-genai with `api_version="v1"` lists and gets models at `/v1/models`, as OpenAI does). Vertex AI's
paths (`/v1/projects/...`, its express mode's `/v1/publishers/...`) are Vertex AI's (`vertex/spec.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runguard.config import GuardSettings
from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers.gemini import json_array, nudge, transcript
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.spec import (
    CredentialPlaces,
    Door,
    PathRule,
    ProviderApi,
    ProviderSpec,
    Tier,
    UpstreamSetting,
)

GEMINI_FAMILY = "gemini"
# `/v1beta/models/{model}:{method}` and its kin: the model a path names (any method).
_METHOD = re.compile(r"^/v1(?:beta|alpha)?\d*/(?:models|tunedModels)/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
_GENERATE = re.compile(
    r"^/v1(?:beta|alpha)?\d*/(?:models|tunedModels)/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_payload(status: int, message: str, code: str) -> Mapping[str, Any]:
    """An error as Gemini writes them (`{"error": {"code", "message", "status"}}`): google-genai raises its
    `ClientError`/`ServerError` for it."""
    return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}


def block_status(guard: GuardSettings) -> int:
    """429 RESOURCE_EXHAUSTED, or 400 FAILED_PRECONDITION (which stops clients that turned retries on)."""
    return guard.gemini_error_status


def _door(pattern: str, **rest: Any) -> Door:
    return Door(re.compile(pattern), GEMINI_FAMILY, model=_METHOD, **rest)


GEMINI = ProviderSpec(
    name=Provider.GEMINI,
    upstream=UpstreamSetting("gemini", "https://generativelanguage.googleapis.com", "RUNGUARD_GEMINI_UPSTREAM"),
    # `Authorization` (an OAuth token), `x-goog-api-key`, and Google's system parameters in the query.
    credentials=CredentialPlaces(
        ("Authorization", "x-goog-api-key"),
        ("key", "$key", "access_token", "oauth_token"),
        claims=("x-goog-api-key", "?key"),  # google-genai's key places: `/v1/...` with one is Gemini's
    ),
    doors=(
        _door(r"^/gemini/", strip="/gemini", tier=Tier.PREFIX),
        _door(_METHOD.pattern),
        _door(r"^/v1(?:beta|alpha)(?:/|$)"),
        _door(r"^/(?:upload|ws)/"),
        _door(r"^/v1(?:/|$)", tier=Tier.KEYED, needs=frozenset({"gemini_key"})),
    ),
    error_payload=error_payload,
    block_status=block_status,
    telemetry_name="gcp.gemini",
)

SPEC = ProviderApi(
    name=Api.GEMINI,
    provider=GEMINI,
    adapter=GeminiAdapter,
    paths=(PathRule(GEMINI_FAMILY, _GENERATE, streaming=frozenset({"streamGenerateContent"})),),
    nudge=nudge.with_note,
    operation="generate_content",
    framing=json_array.framing,
    transcript=transcript.transcript,
)
