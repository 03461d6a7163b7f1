"""Replaying recorded traffic offline through a real guard: what would have tripped where, and what it avoided."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.replay import read_file, replay
from tests.e2e import payloads
from tests.support.guards import guard_settings

ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "find the invoice"}]}


def line(run_id: str, at: float, **more: Any) -> bytes:
    item = {
        "run_id": run_id,
        "at": at,
        "path": "/v1/chat/completions",
        "request": ASK,
        "response": payloads.chat_completion("Still looking.", usage=(1000, 100)),
        **more,
    }
    return orjson.dumps(item) + b"\n"


def test_a_file_s_exchanges_come_in_arrival_order_of_one_run_when_asked(tmp_path: Path) -> None:
    recorded = tmp_path / "runs.jsonl"
    recorded.write_bytes(line("a", 30.0) + b"\n" + line("b", 10.0) + line("a", 20.0, status=None, error="timeout"))
    read: list[int] = []
    every = read_file(recorded, read=read.append)
    assert [(e.run_id, e.at) for e in every] == [("b", 10.0), ("a", 20.0), ("a", 30.0)]
    assert sum(read) == recorded.stat().st_size
    (failed, _) = read_file(recorded, "a")
    assert (failed.status, failed.error, failed.answered_locally) == (None, "timeout", False)


def test_a_line_that_is_no_exchange_is_named(tmp_path: Path) -> None:
    recorded = tmp_path / "bad.jsonl"
    recorded.write_bytes(line("a", 1.0) + b'{"run_id": "a"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a recorded exchange"):
        read_file(recorded)


async def test_a_run_past_its_cap_is_stopped_where_it_would_have_been_and_the_rest_counted_as_avoided(
    tmp_path: Path,
) -> None:
    recorded = tmp_path / "runs.jsonl"
    recorded.write_bytes(b"".join(line("looping", 100.0 + i) for i in range(5)) + line("short", 50.0))
    settings = guard_settings(guard={"detectors": {"max_requests": {"limit": 3}}})
    fed: list[int] = []
    report = await replay(read_file(recorded), settings, default_detectors(), lambda: fed.append(1))
    assert len(fed) == 6 and report.skipped == 0
    looping, short = report.runs["looping"], report.runs["short"]
    assert (looping.stopped_at, looping.detector) == (4, "max_requests")
    # The stopped request and the one after it never go upstream: their recorded cost is avoided.
    assert (looping.requests, looping.avoided_requests) == (3, 2)
    assert looping.avoided_usd == pytest.approx(looping.usd * 2 / 3)
    assert short.stopped_at is None and short.requests == 1 and short.usd > 0
    assert next(t.detector for t in report.trips if t.run_id == "looping") == "max_requests"
    assert report.as_json()["runs"][0]["run_id"] in ("looping", "short")
