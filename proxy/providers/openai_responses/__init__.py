"""openai_responses: its spec (`SPEC`), what the registry lists."""

from runguard.proxy.providers.openai_responses.spec import SPEC

__all__ = ["SPEC"]
