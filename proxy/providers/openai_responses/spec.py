"""OpenAI Responses as a spec: `POST /v1/responses`, and Azure OpenAI's `/openai/responses`."""

from __future__ import annotations

import re

from runguard.proxy.core.events import Api
from runguard.proxy.providers.common.openai_provider import AZURE_FAMILY, OPENAI, OPENAI_FAMILY, encoding
from runguard.proxy.providers.openai_responses import nudge
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from runguard.proxy.providers.spec import PathRule, ProviderApi

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
)
