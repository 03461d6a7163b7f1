"""openai_realtime: OpenAI's Realtime sessions (`SESSIONS`), what the registry lists."""

from runguard.proxy.providers.openai_realtime import events
from runguard.proxy.providers.sockets import Sessions

SESSIONS: Sessions = events

__all__ = ["SESSIONS"]
