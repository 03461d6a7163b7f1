"""Codex CLI rollouts become the Responses API calls the CLI made: one call per run of model items
(reasoning, tool calls, an answer), the items before it (since the last compaction) as the request
with the session's instructions, its recorded usage (cached input included) and times; the proxy
reads every exchange."""

from __future__ import annotations

from typing import Any

import orjson

from bench.corpus.codex import read
from bench.corpus.readers import Context
from bench.corpus.session import Session, exchanges
from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.offline.replay import Exchange, replay


def _line(kind: str, second: int, payload: dict[str, Any]) -> bytes:
    return orjson.dumps({"timestamp": f"2025-10-29T00:59:{second:02d}.000Z", "type": kind, "payload": payload})


def _said(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _call(call_id: str, command: str) -> dict[str, Any]:
    arguments = orjson.dumps({"command": ["bash", "-lc", command]}).decode()
    return {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": call_id}


def _tokens(prompt: int, cached: int) -> dict[str, Any]:
    last = {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": 40, "total_tokens": prompt + 40}
    return {"type": "token_count", "info": {"total_token_usage": last, "last_token_usage": last}}


def _rollout() -> bytes:
    meta = {"id": "019a2d7a", "cwd": "/repo", "originator": "codex_cli_rs", "cli_version": "0.46.0"}
    lines = [
        _line("session_meta", 0, {**meta, "instructions": "You are Codex."}),
        _line("response_item", 0, _said("user", "<environment_context>cwd /repo</environment_context>")),
        _line("response_item", 1, _said("user", "Make the tests pass.")),
        _line("turn_context", 1, {"model": "gpt-5-codex", "cwd": "/repo"}),
        _line("event_msg", 1, {"type": "token_count", "info": None}),  # rate limits only: no call ends
        _line("response_item", 4, {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
        _line("response_item", 4, _call("c1", "pytest -q")),
        _line("response_item", 4, _call("c2", "git status")),
        _line("event_msg", 4, _tokens(9_000, 8_000)),
        _line("response_item", 6, {"type": "function_call_output", "call_id": "c1", "output": "1 failed"}),
        _line("response_item", 6, {"type": "function_call_output", "call_id": "c2", "output": "clean"}),
        _line("response_item", 9, _said("assistant", "Fixed.")),
        _line("event_msg", 9, _tokens(9_500, 9_000)),
        _line("compacted", 10, {"message": "Summary: tests pass."}),
        _line("response_item", 11, _said("user", "Commit it.")),
        _line("response_item", 13, _call("c3", "git commit -am fix")),
        _line("event_msg", 13, _tokens(1_200, 0)),
    ]
    return b"\n".join(lines) + b"\nnot json\n"


def _session() -> Session:
    [session] = read(_rollout(), Context("codex", "codex-cli", None, {"019a2d7a": "resolved"}), "rollout-x")
    return session


def test_each_run_of_model_items_is_one_call_whose_request_is_what_came_before() -> None:
    session = _session()
    assert session.id == "codex/019a2d7a" and session.model == "gpt-5-codex" and session.outcome == "resolved"
    [first, second, third] = list(exchanges(session, pace=10))
    assert first["path"] == "/v1/responses" and first["request"]["instructions"] == "You are Codex."
    assert [i["content"][0]["text"] for i in first["request"]["input"]][1] == "Make the tests pass."
    assert [i["type"] for i in first["response"]["output"]] == ["reasoning", "function_call", "function_call"]
    assert first["response"]["usage"]["input_tokens_details"] == {"cached_tokens": 8_000}
    assert first["request"]["tools"] == [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
    assert [i["type"] for i in second["request"]["input"][-2:]] == ["function_call_output"] * 2
    assert second["response"]["output"] == [_said("assistant", "Fixed.")]
    assert [i["content"][0]["text"] for i in third["request"]["input"]] == ["Summary: tests pass.", "Commit it."]
    assert [e["at"] for e in (first, second, third)] == [1761699541.0, 1761699546.0, 1761699551.0]


async def test_the_proxy_reads_every_converted_call() -> None:
    recorded = [
        Exchange(e["run_id"], e["at"], e["path"], orjson.dumps(e["request"]), orjson.dumps(e["response"]), 200)
        for e in exchanges(_session(), pace=10)
    ]
    report = await replay(recorded, Settings(), default_detectors())
    assert report.skipped == 0 and report.runs["codex/019a2d7a"].requests == 3
