"""Which client family sent a request, from the headers the real clients send (captured from each)."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from runguard.config.settings import CLIENT_FAMILIES
from runguard.proxy.providers.common.clients import ClientFamily, family_of


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
        "nothing",
    ],
)
def test_a_client_is_known_by_what_its_headers_say_about_its_sender(headers: dict[str, str], family: str) -> None:
    assert family_of(CIMultiDict(headers)) == family


def test_the_families_the_config_takes_are_the_families_known() -> None:
    assert set(CLIENT_FAMILIES) == {str(f) for f in ClientFamily}
