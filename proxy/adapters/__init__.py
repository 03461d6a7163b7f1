"""Provider adapters: one per API the proxy understands (Chat, Responses, Gemini)."""

from __future__ import annotations

from runguard.proxy.adapters.base import Adapter
from runguard.proxy.adapters.gemini import GeminiAdapter
from runguard.proxy.adapters.openai_chat import ChatAdapter
from runguard.proxy.adapters.openai_responses import ResponsesAdapter
from runguard.proxy.events import Api

__all__ = ["Adapter", "ChatAdapter", "GeminiAdapter", "ResponsesAdapter", "adapter_for"]


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
