"""The session a request says it belongs to, in the client's own words (without `X-Run-Id`, it roots the run).

Coding-agent CLIs name their session on every request. Its first user message
cannot tell two sessions apart (codex opens every conversation with the same
`<environment_context>` block in one directory on one day), so a session
marker, where the client sends one, is what the proxy groups a run by
(`runs.roots`). Only values that are new for each session count:

- headers: codex's `session-id` (older builds `session_id`) and `thread-id`,
  Claude Code's `X-Claude-Code-Session-Id`;
- Claude Code's `metadata.user_id`: a JSON string whose `session_id` names the
  session, or (older builds) `user_<hash>_account_<uuid>_session_<uuid>`.

Left out on purpose, because they stay the same across one user's or one
app's sessions and would merge them into one run: OpenAI's `user` and
`safety_identifier`, Anthropic's plain `metadata.user_id` (those name an end
user: runs are grouped per end user within a key, `conversation.end_user_of`),
`prompt_cache_key` (apps set one per prompt prefix; codex sets it to the
session id it also sends as a header) and `client_metadata`. A Responses
`conversation` names one conversation and roots its run by itself (the
Responses adapter); `previous_response_id` follows the response it continues.

The marker is kept as a digest, never as sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from runguard.proxy.core.events import digest

# In the order they are looked for: the first one present names the session.
SESSION_HEADERS = ("session-id", "session_id", "x-claude-code-session-id", "thread-id")
MAX_MARKER = 256  # characters of a marker read; a longer value is not a session id
_LEGACY_CLAUDE = re.compile(r"_session_([0-9A-Za-z-]{8,64})$")


def from_headers(headers: Mapping[str, str]) -> str | None:
    """The session a request's headers name (`SESSION_HEADERS`), as a digest; None if they name none."""
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return marker(value)
    return None


def from_user_id(user_id: Any) -> str | None:
    """The session Claude Code's `metadata.user_id` names (a JSON string's `session_id`, or the older
    `..._session_<uuid>` form), as a digest; None for any other user id (an app's own end-user id)."""
    if not isinstance(user_id, str) or not user_id or len(user_id) > 4 * MAX_MARKER:
        return None
    if user_id.startswith("{"):
        try:
            data = orjson.loads(user_id)
        except orjson.JSONDecodeError:
            return None
        session = data.get("session_id") if isinstance(data, dict) else None
        return marker(session) if isinstance(session, str) and session else None
    legacy = _LEGACY_CLAUDE.search(user_id)
    return marker(legacy.group(1)) if legacy else None


def marker(value: str) -> str | None:
    """A session marker as the run's state keeps it: a digest of the value as sent (None if it is blank or
    too long to be a session id)."""
    value = value.strip()
    if not value or len(value) > MAX_MARKER:
        return None
    return digest("session\x00" + value, 16)
