"""What the proxy remembers of a forwarded response: its run, its calls, and a background request's facts."""

from __future__ import annotations

import orjson

from runguard.proxy.core.events import ToolCall
from runguard.proxy.runs import continuation


def test_a_background_request_s_facts_read_back_as_written() -> None:
    calls = [ToolCall("translate", '{"input": "the first sentence"}', "call_1")]
    for pending in (
        continuation.Pending("k_1", "gpt-4o", "agent-1", 3, nests=True, end_user="u_2"),
        continuation.Pending("k_1", "gpt-4o", "agent-1", 1, nests=False),
    ):
        raw = continuation.dumps("r-1", calls, pending)
        assert continuation.pending_of(raw) == ("r-1", pending)
        assert continuation.loads(raw) == ("r-1", {"call_1": ("translate", '{"input": "the first sentence"}')})


def test_an_entry_written_before_end_users_were_kept_still_reads() -> None:
    """A rolling upgrade: replicas of the earlier version wrote five facts, without the end user."""
    raw = orjson.dumps({"run": "r-1", "calls": {}, "pending": ["k_1", "gpt-4o", "agent-1", 3, True]}).decode()
    assert continuation.pending_of(raw) == ("r-1", continuation.Pending("k_1", "gpt-4o", "agent-1", 3, True))


def test_an_entry_of_an_answered_response_is_no_background_request() -> None:
    assert continuation.pending_of(continuation.dumps("r-1", [])) is None
    assert continuation.pending_of("not json") is None
