"""gemini: its spec (`SPEC`), what the registry lists."""

from runguard.proxy.providers.gemini.spec import SPEC

__all__ = ["SPEC"]
