"""Which client family sent a request, from the headers the real clients send (captured from each)."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from runguard.config.settings import CLIENT_FAMILIES
from runguard.proxy.providers.common.clients import ClientFamily, family_of, refined


@pytest.mark.parametrize(
    ("headers", "family"),
    [
        ({"User-Agent": "ai/6.0.333 ai-sdk/provider-utils/4.0.64 runtime/node.js/v20.20.2"}, ClientFamily.VERCEL_AI),
        ({"User-Agent": "codex_exec/0.171.0 (Debian 12.0.0; x86_64) xterm", "originator": "codex_exec"}, "codex"),
        ({"User-Agent": "my-wrapper/1.0", "originator": "codex_cli_rs"}, ClientFamily.CODEX),
        ({"User-Agent": "claude-cli/2.1.197 (external, sdk-cli)", "x-app": "cli"}, ClientFamily.CLAUDE_CODE),
        ({"User-Agent": "AsyncOpenAI/Python 3.63.0", "X-Stainless-Lang": "python"}, ClientFamily.OTHER),
        (
            {"User-Agent": "google-genai-sdk/2.34.0 gl-python/3.11.2", "x-goog-api-client": "google-genai-sdk/2.34.0"},
            "other",
        ),
        ({"User-Agent": "ai-sdk/openai/3.0.141"}, ClientFamily.VERCEL_AI),
        (
            {
                "User-Agent": "google-genai-sdk/2.34.0 gl-python/3.11.7 "
                "langchain-google-genai/4.4.3-ChatGoogleGenerativeAI"
            },
            "langchain_google",
        ),
        ({}, ClientFamily.OTHER),
    ],
    ids=[
        "ai-sdk",
        "codex-exec",
        "codex-originator",
        "claude-code",
        "openai-python",
        "google-genai",
        "ai-sdk-alone",
        "langchain-gemini",
        "nothing",
    ],
)
def test_a_client_is_known_by_what_its_headers_say_about_its_sender(headers: dict[str, str], family: str) -> None:
    assert family_of(CIMultiDict(headers)) == family


def test_the_families_the_config_takes_are_the_families_known() -> None:
    assert set(CLIENT_FAMILIES) == {str(f) for f in ClientFamily}


def test_smolagents_is_known_by_its_agents_system_prompt_when_its_headers_are_the_openai_sdk_s() -> None:
    code_agent = "You are an expert assistant who can solve any task using code blobs. You will be given a task"
    assert refined(ClientFamily.OTHER, code_agent) == ClientFamily.SMOLAGENTS
    assert refined(ClientFamily.OTHER, "You are a helpful assistant.") == ClientFamily.OTHER
    assert refined(ClientFamily.CODEX, code_agent) == ClientFamily.CODEX  # what the headers say comes first


def test_crewai_is_known_by_its_agents_system_prompt() -> None:
    """As crewai 1.15 sends it (captured); a prompt that only mentions a goal is not CrewAI's."""
    crew = "You are Travel researcher. You know airlines.\nYour personal goal is: Find cheap flights"
    assert refined(ClientFamily.OTHER, crew) == ClientFamily.CREWAI
    assert refined(ClientFamily.OTHER, "You are a planner.\n\nYour personal goal is: x") == ClientFamily.OTHER
    assert refined(ClientFamily.OTHER, "Help.\nYour personal goal is: x") == ClientFamily.OTHER
