"""Claude Code transcripts become the Anthropic Messages calls the CLI made: one call per answer (its
streamed lines merged), the conversation before it as the request (from the last compaction on), the
recorded answer with its usage (cache reads included) as the response, the recorded times; the proxy
reads every exchange."""

from __future__ import annotations

from typing import Any

import orjson

from bench.corpus.claude_code import read
from bench.corpus.readers import Context
from bench.corpus.session import Session, exchanges
from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.offline.replay import Exchange, replay


def _line(kind: str, second: int, message: dict[str, Any] | None = None, **more: Any) -> bytes:
    entry = {"type": kind, "timestamp": f"2025-11-19T22:54:{second:02d}.000Z", "sessionId": "s1", **more}
    if message is not None:
        entry["message"] = message
    return orjson.dumps(entry)


def _answer(msg_id: str, block: dict[str, Any], cache_read: int, output: int) -> dict[str, Any]:
    usage = {"input_tokens": 3, "cache_read_input_tokens": cache_read, "output_tokens": output}
    model = "claude-sonnet-4-5-20250929"
    return {"id": msg_id, "role": "assistant", "model": model, "content": [block], "usage": usage}


def _use(tool_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}


def _result(tool_id: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text}]}


def _transcript() -> bytes:
    lines = [
        _line("queue-operation", 0, operation="dequeue"),
        _line("user", 1, {"role": "user", "content": "Fix the failing test."}),
        _line("assistant", 3, _answer("msg_1", {"type": "text", "text": "Looking."}, 15_000, 5)),
        _line("assistant", 4, _answer("msg_1", _use("t1", "pytest -q"), 15_000, 40)),
        _line("assistant", 4, _answer("msg_1", _use("t2", "env"), 15_000, 61)),
        _line("user", 6, _result("t1", "1 failed")),
        _line("user", 6, _result("t2", "PATH=/usr/bin")),
        b"not json",
        _line("assistant", 7, _answer("msg_side", {"type": "text", "text": "subagent"}, 0, 1), isSidechain=True),
        _line("assistant", 9, _answer("msg_2", _use("t3", "sed -i s/a/b/ f.py"), 16_000, 30)),
        _line("user", 10, _result("t3", "")),
        _line("system", 11, subtype="compact_boundary"),
        _line("user", 12, {"role": "user", "content": "Summary of the conversation so far."}, isCompactSummary=True),
        _line("assistant", 14, {"model": "<synthetic>", "id": "x", "content": [{"type": "text", "text": "API Error"}]}),
        _line("assistant", 15, _answer("msg_3", {"type": "text", "text": "Done."}, 2_000, 3)),
    ]
    return b"\n".join(lines) + b"\n"


def _session() -> Session:
    ctx = Context("cc", "claude-code", None, {"task-1__5f1c2d3e": "resolved"}, instance_dir=0)
    ctx.path = "task-1/run/agent/sessions/projects/-app/5f1c2d3e-0000.jsonl"
    [session] = read(_transcript(), ctx, "5f1c2d3e-0000")
    return session


def test_each_answer_is_one_call_whose_request_is_the_conversation_before_it() -> None:
    session = _session()
    assert session.id == "cc/task-1__5f1c2d3e" and session.outcome == "resolved"
    assert session.model == "claude-sonnet-4-5-20250929" and len(session.turns) == 3
    [first, second, third] = list(exchanges(session, pace=10))
    assert first["path"] == "/anthropic/v1/messages" and first["run_id"] == "cc/task-1__5f1c2d3e"
    assert first["request"]["messages"] == [{"role": "user", "content": "Fix the failing test."}]
    assert [b["type"] for b in first["response"]["content"]] == ["text", "tool_use", "tool_use"]
    assert first["response"]["stop_reason"] == "tool_use" and first["response"]["id"] == "msg_1"
    assert first["response"]["usage"] == {"input_tokens": 3, "cache_read_input_tokens": 15_000, "output_tokens": 61}
    results = second["request"]["messages"][-1]
    assert [b["tool_use_id"] for b in results["content"]] == ["t1", "t2"]  # one answer's results go back together
    assert "subagent" not in orjson.dumps(second["request"]).decode()
    assert third["request"]["messages"] == [{"role": "user", "content": "Summary of the conversation so far."}]
    assert third["response"]["stop_reason"] == "end_turn"
    assert [e["at"] for e in (first, second, third)] == [1763592841.0, 1763592846.0, 1763592854.0]
    assert first["request"]["tools"] == [{"name": "Bash", "input_schema": {"type": "object"}}]


def test_a_subagent_transcript_is_its_own_session_and_a_warmup_is_none() -> None:
    ctx = Context("cc", "claude-code", None, {})
    side = [
        _line("user", 1, {"role": "user", "content": "Find the config loader."}, isSidechain=True),
        _line("assistant", 2, _answer("m1", _use("t1", "grep -rn load_config ."), 100, 9), isSidechain=True),
        _line("user", 3, _result("t1", "app.py:3"), isSidechain=True),
        _line("assistant", 4, _answer("m2", {"type": "text", "text": "app.py"}, 100, 2), isSidechain=True),
    ]
    [session] = read(b"\n".join(side), ctx, "agent-1234abcd")
    assert session.id == "cc/agent-1234abcd" and len(session.turns) == 2 and session.meta["subagent"] is True
    warmup = _line("assistant", 1, _answer("m0", {"type": "text", "text": "Ready."}, 0, 5), isSidechain=True)
    assert list(read(warmup, ctx, "agent-0")) == []  # its prompt is not recorded: nothing to send


async def test_the_proxy_reads_every_converted_call() -> None:
    recorded = [
        Exchange(e["run_id"], e["at"], e["path"], orjson.dumps(e["request"]), orjson.dumps(e["response"]), 200)
        for e in exchanges(_session(), pace=10)
    ]
    report = await replay(recorded, Settings(), default_detectors())
    assert report.skipped == 0 and report.runs["cc/task-1__5f1c2d3e"].requests == 3
