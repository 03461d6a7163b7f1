"""The validation of rebuilt usage: a session's recorded count against its count with the usage dropped
and rebuilt, both weighed as `max_tokens` weighs them (cache reads at a tenth)."""

from __future__ import annotations

import orjson

from bench.corpus.claude_code import read
from bench.corpus.readers import Context
from bench.corpus.usage_check import Counted, compare, counted


def _transcript() -> bytes:
    used = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 1_000,
        "cache_read_input_tokens": 30_000,
        "output_tokens": 90,
    }

    def said(msg_id: str, text: str) -> dict[str, object]:
        return {"id": msg_id, "content": [{"type": "text", "text": text}], "usage": used}

    lines = [
        {"type": "user", "timestamp": "2025-11-19T22:54:00Z", "message": {"role": "user", "content": "Fix it."}},
        {"type": "assistant", "timestamp": "2025-11-19T22:54:03Z", "message": said("m1", "Looking.")},
        {"type": "user", "timestamp": "2025-11-19T22:54:04Z", "message": {"role": "user", "content": "Go on."}},
        {"type": "assistant", "timestamp": "2025-11-19T22:54:09Z", "message": said("m2", "Done.")},
    ]
    return b"\n".join(orjson.dumps(line) for line in lines)


def test_counts_weigh_cache_reads_at_a_tenth() -> None:
    count = Counted(tokens=62_200, read=60_000, out=180)
    assert count.weighed == 62_200 - 60_000 + 6_000 and round(count.share, 3) == round(60_000 / 62_020, 3)


def test_a_recorded_session_is_compared_with_its_usage_rebuilt() -> None:
    [session] = read(_transcript(), Context("cc", "claude-code", None, {}), "s1")
    assert "usage" not in session.meta  # recorded: nothing rebuilt at build time
    recorded, rebuilt = compare(session)
    assert recorded == Counted(tokens=2 * 31_100, read=60_000, out=180)
    assert all(turn.reconstructed for turn in session.turns) and rebuilt == counted(session.turns)
    assert rebuilt.read == sum((turn.usage or {})["cache_read_input_tokens"] for turn in session.turns) > 0
