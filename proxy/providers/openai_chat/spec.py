"""OpenAI Chat Completions as a spec: `POST /v1/chat/completions`, Azure's deployments' and Gemini's
OpenAI-compatible one (`/v1beta/openai/chat/completions`, the openai SDK's base URL `.../v1beta/openai/`),
which is read as Chat and sent to the Gemini upstream."""

from __future__ import annotations

import re

from runguard.proxy.core.events import Api
from runguard.proxy.providers.gemini.spec import GEMINI_FAMILY
from runguard.proxy.providers.openai.provider import AZURE_FAMILY, OPENAI, OPENAI_FAMILY, encoding
from runguard.proxy.providers.openai_chat import nudge, transcript
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.spec import PathRule, ProviderApi

SPEC = ProviderApi(
    name=Api.CHAT,
    provider=OPENAI,
    adapter=ChatAdapter,
    paths=(
        PathRule(OPENAI_FAMILY, re.compile(r"^/v1/chat/completions/*$")),
        PathRule(AZURE_FAMILY, re.compile(r"/chat/completions/*$")),
        PathRule(GEMINI_FAMILY, re.compile(r"^/v1(?:beta|alpha)?\d*/openai/chat/completions/?$")),
    ),
    nudge=nudge.with_note,
    encoding=encoding,
    stream_usage_on_request=True,
    transcript=transcript.transcript,
)
