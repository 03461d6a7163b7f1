"""OpenAI Responses as a spec: `POST /v1/responses`, and Azure OpenAI's `/openai/responses`."""

from __future__ import annotations

import re

from runguard.proxy.core.events import Api
from runguard.proxy.providers.openai.provider import AZURE_FAMILY, OPENAI, OPENAI_FAMILY, encoding
from runguard.proxy.providers.openai_responses import nudge, socket, transcript
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from runguard.proxy.providers.openai_responses.output import FINAL_STATUSES
from runguard.proxy.providers.spec import PathRule, Polls, ProviderApi

# OpenAI's poll path, and Azure OpenAI's classic (`/openai/responses/{id}?api-version=...`) and v1 ones.
_RETRIEVE = re.compile(r"^(?:/v1|/openai|/openai/v1)/responses/(?P<id>[^/]+)/?$")

SPEC = ProviderApi(
    name=Api.RESPONSES,
    provider=OPENAI,
    adapter=ResponsesAdapter,
    paths=(
        PathRule(OPENAI_FAMILY, re.compile(r"^/v1/responses/*$")),
        PathRule(AZURE_FAMILY, re.compile(r"/responses/*$")),
    ),
    nudge=nudge.with_note,
    encoding=encoding,
    chains_responses=True,
    polls=Polls(_RETRIEVE, FINAL_STATUSES),  # `background: true` responses
    socket=socket,  # its WebSocket mode
    transcript=transcript.transcript,
)
