"""providers: the provider APIs the proxy reads, reached only through their specs.

The public face the layers above use is the shared modules listed in `__all__`; each provider's own
folder (`openai_chat/`, `gemini/`, ...) is read by the registry alone (import-linter's `provider-seam`).
"""

__all__ = [
    "answers",
    "base",
    "credentials",
    "framing",
    "paths",
    "registry",
    "routes",
    "sockets",
    "spec",
    "transcript",
]
