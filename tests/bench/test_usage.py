"""A Claude Code answer recorded without usage gets the usage its prompt cache would have given it: the
prompt the call before sent is read from the cache within 5 minutes, written again after a longer gap,
the system prompt alone read after a compaction; the turn and its exchange say the usage was rebuilt;
recorded usage is never replaced; the proxy's replay weighs the rebuilt cache reads as recorded ones."""

from __future__ import annotations

import math
from typing import Any

import orjson

from bench.corpus import usage
from bench.corpus.claude_code import read
from bench.corpus.readers import Context
from bench.corpus.session import Session, exchanges
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.offline.replay import Exchange, replay
from tests.support.guards import guard_settings


def _line(kind: str, minute: int, second: int, message: dict[str, Any] | None = None, **more: Any) -> bytes:
    entry = {"type": kind, "timestamp": f"2025-11-19T22:{minute:02d}:{second:02d}.000Z", **more}
    if message is not None:
        entry["message"] = message
    return orjson.dumps(entry)


def _answer(msg_id: str, text: str, recorded: dict[str, int] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"id": msg_id, "role": "assistant", "content": [{"type": "text", "text": text}]}
    if recorded is not None:
        message["usage"] = recorded
    return message


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _session(first_usage: dict[str, int] | None = None) -> Session:
    lines = [
        _line("user", 0, 0, _user("Fix the failing test in the parser module.")),
        _line("assistant", 0, 5, _answer("m1", "Looking at the parser.", first_usage)),
        _line("user", 1, 0, _user("The test is tests/test_parser.py.")),
        _line("assistant", 1, 5, _answer("m2", "Found it.")),
        _line("user", 9, 0, _user("Go on.")),  # 8 minutes after the call before: its cache entry is gone
        _line("assistant", 9, 5, _answer("m3", "Fixed.")),
        _line("system", 9, 30, subtype="compact_boundary"),
        _line("user", 10, 0, _user("Summary of the conversation so far.")),
        _line("assistant", 10, 5, _answer("m4", "Done.")),
    ]
    [session] = read(b"\n".join(lines), Context("cc", "claude-code", None, {}), "s1")
    return session


def _prompt(used: dict[str, Any]) -> int:
    return int(used["input_tokens"] + used["cache_creation_input_tokens"] + used["cache_read_input_tokens"])


def test_a_call_reads_the_prompt_sent_before_it_and_writes_what_is_new() -> None:
    session = _session()
    first, second, third, fourth = (turn.usage or {} for turn in session.turns)
    assert first["cache_read_input_tokens"] == 0 and first["input_tokens"] == usage.UNCACHED
    assert first["cache_creation_input_tokens"] == _prompt(first) - usage.UNCACHED > usage.UNSEEN
    assert second["cache_read_input_tokens"] == _prompt(first)  # a minute later: the prefix is still cached
    assert second["cache_creation_input_tokens"] == _prompt(second) - _prompt(first) - usage.UNCACHED > 0
    assert third["cache_read_input_tokens"] == 0  # 8 minutes later: written again
    assert third["cache_creation_input_tokens"] == _prompt(third) - usage.UNCACHED
    assert fourth["cache_read_input_tokens"] == usage.UNSEEN  # after a compaction: the system prompt alone
    assert fourth["output_tokens"] == round(math.ceil(len("Done.") / 4) * usage.SCALE)


def test_rebuilt_usage_is_marked_on_the_session_and_every_exchange() -> None:
    session = _session()
    assert session.model == "unknown" and session.meta["usage"] == "reconstructed"  # no model is invented
    assert all(turn.reconstructed for turn in session.turns)
    assert all(exchange["usage_reconstructed"] is True for exchange in exchanges(session, pace=10))


def test_recorded_usage_is_never_replaced() -> None:
    recorded = {
        "input_tokens": 7,
        "cache_creation_input_tokens": 20_000,
        "cache_read_input_tokens": 0,
        "output_tokens": 9,
    }
    session = _session(dict(recorded))
    first, *rest = session.turns
    assert first.usage == recorded and not first.reconstructed
    assert all(turn.reconstructed for turn in rest) and session.meta["usage"] == "reconstructed for 3 calls"
    [kept, *_] = exchanges(session, pace=10)
    assert kept["response"]["usage"] == recorded and "usage_reconstructed" not in kept
    assert usage.reconstruct(session) == 0  # nothing left to fill: a second pass changes nothing
    assert first.usage == recorded


def _exchange(e: dict[str, Any]) -> Exchange:
    return Exchange(e["run_id"], e["at"], e["path"], orjson.dumps(e["request"]), orjson.dumps(e["response"]), 200)


async def test_the_replay_weighs_rebuilt_cache_reads_as_max_tokens_does_recorded_ones() -> None:
    session = _session()
    used = [turn.usage or {} for turn in session.turns]
    total = sum(_prompt(u) + u["output_tokens"] for u in used)
    read = sum(u["cache_read_input_tokens"] for u in used)
    limit = total - read // 2  # reached counting cache reads in full, not at a tenth
    recorded = [_exchange(e) for e in exchanges(session, pace=10)]
    recorded.append(_exchange({**next(exchanges(session, pace=10)), "at": recorded[-1].at + 5}))  # one call more
    capped = guard_settings(guard={"detectors": {"max_tokens": {"limit": limit}}})
    report = await replay(recorded, capped, default_detectors())
    assert report.runs["cc/s1"].stopped_at is None
    full = guard_settings(guard={"detectors": {"max_tokens": {"limit": limit, "cached_weight": 1.0}}})
    report = await replay(recorded, full, default_detectors())
    assert (report.runs["cc/s1"].detector, report.runs["cc/s1"].stopped_at) == (
        "max_tokens",
        5,
    )  # the call after the four
