"""openai_chat: its spec (`SPEC`), what the registry lists."""

from runguard.proxy.providers.openai_chat.spec import SPEC

__all__ = ["SPEC"]
