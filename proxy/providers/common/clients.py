"""Which client family sent a request, from what its headers say about its sender.

A stop lands only if the client ends on it and shows its reason, and clients
differ (docs/stopping.md keeps the table, measured with the real clients):

- the Vercel AI SDK (npm `ai`, any provider package) retries every 429 twice,
  whatever `x-should-retry` says, and ends on a 400 at once with its message;
- OpenAI's Codex CLI ends on a 429 at once but prints only its status line,
  and on a 400 prints the error body, the reason in it;
- Claude Code ends on a 429 and prints its message;
- LangChain's Gemini chat model (`langchain-google-genai`) retries a 429 with its own backoff (six refusals
  in 34 s), and raises a 400 at once;
- smolagents' agents retry, 60 s apart, any error whose text says `429` or "rate limit", and raise a 400
  at once;
- CrewAI's agents retry any error (nine refusals of a 429 in 10.8 s, three of a 400), and end their task
  on a completion, its text the task's output.

Known by the `User-Agent` each sends (`ai/6.0.333 ai-sdk/provider-utils/4.0.64
runtime/node.js/v20`, `codex_exec/0.171.0 (...)`, `claude-cli/2.1.197 (external,
sdk-cli)`, `google-genai-sdk/2.34.0 ... langchain-google-genai/4.4.3-ChatGoogleGenerativeAI`)
and codex's `originator` header; smolagents and CrewAI send the openai SDK's own, and are known
by their agents' system prompts (`refined`). A request whose sender is not known
is `OTHER`: it gets the answer its detector names, as before.
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
    LANGCHAIN_GOOGLE = "langchain_google"
    SMOLAGENTS = "smolagents"
    CREWAI = "crewai"
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
    if " langchain-google-genai/" in agent:
        return ClientFamily.LANGCHAIN_GOOGLE
    return ClientFamily.OTHER


# The first words of the system prompts of smolagents' CodeAgent and ToolCallingAgent (smolagents/prompts/).
_SMOLAGENTS = "You are an expert assistant who can solve any task using "
# CrewAI's agent prompt: "You are {role}. {backstory}\nYour personal goal is: {goal}" (crewai 1.x).
_CREWAI = re.compile(r"\AYou are [^\n]*\nYour personal goal is: ")


def refined(family: str, instructions: str) -> str:
    """The family of a request its headers did not name (`OTHER`), from the framework its instructions show."""
    if family != ClientFamily.OTHER or not instructions.startswith("You are "):
        return family
    if instructions.startswith(_SMOLAGENTS):
        return ClientFamily.SMOLAGENTS
    if _CREWAI.match(instructions):
        return ClientFamily.CREWAI
    return family
