"""Provider adapters: one per API the proxy understands (Chat, Responses, Gemini)."""

from __future__ import annotations

from runguard.proxy.core.events import Api
from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter


def adapter_for(api: Api) -> Adapter | None:
    """The adapter for an API; None for APIs that are forwarded and only counted.

    Adapters hold no state (each stream gets its own parser), so a fresh one
    per call costs a small object and keeps nothing at module level.
    """
    if api is Api.CHAT:
        return ChatAdapter()
    if api is Api.RESPONSES:
        return ResponsesAdapter()
    if api is Api.GEMINI:
        return GeminiAdapter()
    return None
