"""Records as the guard emits them, for filling a store in tests."""

from __future__ import annotations

from typing import Any

from runguard.proxy.records import RecordedBody, RequestRecord, TripRecord, VerdictRecord

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
