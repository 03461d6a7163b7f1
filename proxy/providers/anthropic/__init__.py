"""anthropic: its spec (`SPEC`), what the registry lists."""

from runguard.proxy.providers.anthropic.spec import SPEC

__all__ = ["SPEC"]
