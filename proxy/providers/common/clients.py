"""Which client family sent a request, from what its headers say about its sender.

A stop lands only if the client ends on it and shows its reason, and clients
differ (docs/stopping.md keeps the table, measured with the real clients):

- the Vercel AI SDK (npm `ai`, any provider package) retries every 429 twice,
  whatever `x-should-retry` says, and ends on a 400 at once with its message;
- OpenAI's Codex CLI ends on a 429 at once but prints only its status line,
  and on a 400 prints the error body, the reason in it;
- Claude Code ends on a 429 and prints its message.

Known by the `User-Agent` each sends (`ai/6.0.333 ai-sdk/provider-utils/4.0.64
runtime/node.js/v20`, `codex_exec/0.171.0 (...)`, `claude-cli/2.1.197 (external,
sdk-cli)`) and codex's `originator` header. A request whose sender is not known is
`OTHER`: it gets the answer its detector names, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum

_AI_SDK = re.compile(r"(?:^|\s)ai-sdk/")


class ClientFamily(StrEnum):
    VERCEL_AI = "vercel_ai"
    CODEX = "codex"
    CLAUDE_CODE = "claude_code"
    OTHER = "other"


def family_of(headers: Mapping[str, str]) -> ClientFamily:
    """The family of the client that sent a request with these headers."""
    agent = headers.get("User-Agent", "")
    if _AI_SDK.search(agent):  # a word of its own: google-genai's `google-genai-sdk/2.34.0` is not it
        return ClientFamily.VERCEL_AI
    if agent.startswith("codex_") or headers.get("originator", "").startswith("codex_"):
        return ClientFamily.CODEX
    if agent.startswith("claude-cli/"):
        return ClientFamily.CLAUDE_CODE
    return ClientFamily.OTHER
