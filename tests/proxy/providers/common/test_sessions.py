"""Which session a request names: codex's and Claude Code's markers count, stable user ids do not."""

from __future__ import annotations

import json

import pytest
from multidict import CIMultiDict

from runguard.proxy.providers.anthropic.adapter import AnthropicAdapter
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common import sessions

CODEX = "01a2498a-af9a-7ab0-8bfd-63b35735003c"


def test_codex_s_and_claude_code_s_session_headers_name_the_session() -> None:
    for name in ("session-id", "session_id", "X-Claude-Code-Session-Id", "thread-id"):
        assert sessions.from_headers(CIMultiDict({name: CODEX})) == sessions.marker(CODEX)
    assert sessions.from_headers(CIMultiDict({"User-Agent": "codex_exec/0.171.0"})) is None


def test_the_session_header_comes_before_the_thread_header() -> None:
    """A codex sub-agent's thread runs in its parent's session: the session names its run."""
    headers = CIMultiDict({"thread-id": "thread-of-a-sub-agent", "session-id": CODEX})
    assert sessions.from_headers(headers) == sessions.marker(CODEX)


def test_claude_code_s_user_id_names_its_session_in_either_form() -> None:
    current = json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": CODEX})
    older = f"user_{'a' * 64}_account__session_{CODEX}"
    assert sessions.from_user_id(current) == sessions.from_user_id(older) == sessions.marker(CODEX)


@pytest.mark.parametrize(
    "user_id",
    ["user-4711", "alice@example.com", json.dumps({"device_id": "d"}), "{not json", "[1]", 7, None, "x" * 5000],
    ids=["app-id", "email", "json-without-session", "broken-json", "json-list", "number", "none", "huge"],
)
def test_an_app_s_own_user_id_names_no_session(user_id: object) -> None:
    """A stable end-user id would merge that user's sessions into one run: it is not a session."""
    assert sessions.from_user_id(user_id) is None


def test_a_marker_is_a_digest_and_blank_or_oversized_values_are_none() -> None:
    assert sessions.marker(CODEX) != CODEX and CODEX not in (sessions.marker(CODEX) or "")
    assert sessions.marker(" ") is None and sessions.marker("s" * (sessions.MAX_MARKER + 1)) is None
    assert sessions.marker(" a ") == sessions.marker("a")


def test_the_anthropic_adapter_reads_claude_code_s_session_and_the_header_wins() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"user_id": json.dumps({"device_id": "d", "session_id": CODEX})},
    }
    adapter = AnthropicAdapter()
    assert adapter.parse_request(json.dumps(body).encode(), RequestContext()).session == sessions.marker(CODEX)
    named = RequestContext(session=sessions.marker("from-the-header"))
    assert adapter.parse_request(json.dumps(body).encode(), named).session == sessions.marker("from-the-header")
