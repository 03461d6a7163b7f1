"""Records as the guard emits them, for filling a store in tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runguard.proxy.store import RunReader
from runguard.proxy.store.records import Record, RecordedBody, RequestRecord, TripRecord, VerdictRecord

T0 = 1_800_000_000.0


def request(run_id: str = "run-1", index: int = 1, **fields: Any) -> RequestRecord:
    values: dict[str, Any] = {
        "run_id": run_id,
        "key_hash": "kh-test",
        "index": index,
        "at": T0 + index,
        "agent": "planner",
        "model": "gpt-4o-mini",
        "provider": "openai",
        "api": "chat",
        "streamed": False,
        "status": 200,
        "input_tokens": 100,
        "output_tokens": 20,
        "cached_tokens": 10,
        "usd": 0.001,
        "upstream_ms": 120.0,
        "overhead_ms": 0.4,
        "tool_calls": ("search",),
        "finish_reason": "tool_calls",
    }
    values.update(fields)
    return RequestRecord(**values)


def trip(run_id: str = "run-1", detector: str = "non_progress", action: str = "block", **fields: Any) -> TripRecord:
    values: dict[str, Any] = {
        "run_id": run_id,
        "key_hash": "kh-test",
        "detector": detector,
        "action": action,
        "reason": "tool 'search' returned the same result 3 times",
        "scope": "run",
        "request_index": 3,
        "at": T0 + 3.5,
        "usd_so_far": 0.003,
        "tokens_so_far": 360,
        "usd_avoided_estimate": 0.097,
        "evidence": {"tool": "search", "hashes": ("a1", "a1", "a1")},
    }
    values.update(fields)
    return TripRecord(**values)


def verdict(detector: str = "non_progress", action: str = "block") -> VerdictRecord:
    return VerdictRecord(detector, action, "same result 3 times")


def body(request_json: bytes = b'{"model":"gpt-4o-mini","messages":[]}') -> RecordedBody:
    return RecordedBody("/v1/chat/completions", "", request_json, b'{"choices":[]}', 200)


def batches() -> Iterator[list[Record]]:
    """Batches that add to each other's runs: totals, agents, first/last seen, exit order, bodies."""
    yield [
        request("run-a", 1, agent="planner", body=body()),
        request("run-a", 2, agent="coder", at=T0 + 9, tool_calls=()),
        request("run-b", 1, agent="", status=500, error="upstream 500", usd=float("nan")),
        trip("run-b", action="warn", evidence={"set": {1}, 2: b"x"}),
    ]
    yield [
        request("run-a", 3, agent="planner", at=T0 - 5),  # earlier: first_seen moves back
        request("run-a", 4, agent="reviewer", finish_reason="stop", tool_calls=()),
        trip("run-a", at=T0 + 20),  # the latest outcome wins
        request("run-c", 1, verdicts=(verdict(),), handoff_to="billing"),
    ]
    yield [request("run-c", 2, agent="planner", at=T0 + 100, blocked_by="tool_storm")]


def a_day_of_runs() -> list[Record]:
    """Six runs and their trips: done (two tool turns and an answer), looped (tripped by non_progress, then
    answered locally; a tool_storm warning), failed (upstream error), waiting (tool calls open since T0 + 30),
    spiral-a and spiral-b (one spiral trip each)."""
    return [
        request("done", 1, at=T0 + 1, body=body()),
        request("done", 2, at=T0 + 2, agent="writer"),
        request("done", 3, at=T0 + 3, tool_calls=(), finish_reason="stop"),
        request("looped", 1, at=T0 + 11),
        request("looped", 2, at=T0 + 12),
        request("looped", 3, at=T0 + 13, verdicts=(verdict(),)),
        trip("looped", at=T0 + 13.5, usd_avoided_estimate=0.5),
        request("looped", 4, at=T0 + 14, blocked_by="non_progress", status=429, usd=0.0),
        trip("looped", "tool_storm", "warn", at=T0 + 13.6),
        request("failed", 1, at=T0 + 20, status=502, error="UpstreamError", tool_calls=()),
        request("waiting", 1, at=T0 + 30),
        trip("spiral-a", "spiral", at=T0 + 40, usd_avoided_estimate=0.25),
        trip("spiral-b", "spiral", at=T0 + 41, usd_avoided_estimate=0.25),
    ]


def many_runs() -> list[Record]:
    """120 runs one second apart (newest last); every 3rd tripped by spiral, every 5th on key kh-b; one run of
    yesterday; a tool_storm warning on run-001; run-007's body recorded."""
    records: list[Record] = []
    for n in range(120):
        run_id = f"run-{n:03d}"
        key = "kh-b" if n % 5 == 0 else "kh-a"
        finished = {"tool_calls": (), "finish_reason": "stop"} if n % 3 else {}
        model = "gpt-4o" if n % 2 else "gpt-4o-mini"
        kept = body() if n == 7 else None
        records.append(request(run_id, 1, at=T0 + n, key_hash=key, model=model, body=kept, **finished))
        if n % 3 == 0:
            records.append(trip(run_id, "spiral", at=T0 + n + 0.5, key_hash=key, usd_avoided_estimate=0.5))
    records.append(request("yesterday", 1, at=T0 - 86400.0, key_hash="kh-a", usd=0.25, tool_calls=()))
    records.append(trip("run-001", "tool_storm", "warn", at=T0 + 1.5, usd_avoided_estimate=0.3))
    return records


def large_batch() -> list[Record]:
    """More rows than one statement takes: 301 requests over 76 runs, 3 agents, bodies, 13 trips."""
    records: list[Record] = [
        request(f"run-{i // 4}", i % 4 + 1, agent=("planner", "coder", "reviewer")[i % 3], body=body())
        for i in range(301)
    ]
    records += [trip(f"run-{i}", at=T0 + i) for i in range(0, 76, 6)]
    return records


async def run_detail(runs: RunReader, run_id: str) -> dict[str, Any] | None:
    """A run's totals, all its requests in order and its trips in order (one page as large as the run, read
    in one snapshot: `RunReader.detail`); None for an unknown run."""
    page = await runs.detail(run_id, 1, 100_000)
    if page is None:
        return None
    steps = [{name: value for name, value in row.items() if name != "id"} for row in page["requests"]]
    return {"run": page["run"], "requests": steps, "trips": page["trips"]}
