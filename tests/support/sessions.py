"""Hand-written agent sessions as recorded exchanges (docs/records.md), for replay tests: a long healthy
coding session and a runaway that gets the same error back forever."""

from __future__ import annotations

from typing import Any

import orjson

from tests.e2e import payloads

T0 = 1_800_000_000.0
CHAT = "/v1/chat/completions"
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("read_file", "edit_file", "run_tests")
]
MODULES = ("parser", "lexer", "config", "cache", "cli", "render", "store", "auth", "http", "jobs")


def _step(turn: int) -> tuple[str, dict[str, Any], str]:
    """The healthy agent's turn-th action and what it got back: it reads a module, edits it, runs its
    tests (one fewer failing each round), moving to the next module every three turns."""
    module, phase = MODULES[(turn // 3) % len(MODULES)], turn % 3
    round_ = turn // 3
    if phase == 0:
        lines = "\n".join(f"{n}: def {module}_{round_}_{n}(x): return x + {n * round_}" for n in range(1, 9))
        return "read_file", {"path": f"src/{module}_{round_}.py"}, lines
    if phase == 1:
        args = {"path": f"src/{module}_{round_}.py", "old": f"x + {round_}", "new": f"x - {round_} * 2"}
        return "edit_file", args, f"edited src/{module}_{round_}.py: 1 replacement at line {round_ % 9 + 1}"
    failing = max(0, 60 - round_)
    report = f"{120 - failing} passed, {failing} failed in {round_ % 7 + 1}.{round_ % 10}s"
    return "run_tests", {"selector": f"tests/test_{module}_{round_}.py"}, f"test_{module}_{round_}: {report}"


def healthy(run_id: str, calls: int, start: float = T0, pace: float = 5.0) -> list[dict[str, Any]]:
    """A coding agent making progress for `calls` model calls (the last one answers in text)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You fix bugs in this repository."},
        {"role": "user", "content": "The test suite fails after the refactor; make it pass."},
    ]
    lines = []
    for turn in range(calls):
        request = {"model": "gpt-4o-mini", "messages": list(messages), "tools": TOOLS}
        if turn == calls - 1:
            response = payloads.chat_completion("All tests pass now.", usage=(2000 + 40 * turn, 20))
        else:
            tool, args, result = _step(turn)
            call = (f"call_{turn}", tool, orjson.dumps(args).decode())
            response = payloads.chat_completion(tool_calls=[call], usage=(2000 + 40 * turn, 30))
            messages.append(response["choices"][0]["message"])
            messages.append({"role": "tool", "tool_call_id": call[0], "content": result})
        lines.append(
            {"run_id": run_id, "at": start + turn * pace, "path": CHAT, "request": request, "response": response}
        )
    return lines


def runaway(run_id: str, calls: int, start: float = T0) -> list[dict[str, Any]]:
    """An agent calling parse_document with new arguments and always getting the same error back."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You extract data."},
        {"role": "user", "content": "Total?"},
    ]
    lines = []
    for turn in range(calls):
        call = (f"call_{turn}", "parse_document", orjson.dumps({"document": "a.pdf", "n": turn}).decode())
        response = payloads.chat_completion(tool_calls=[call], usage=(1000, 50))
        request = {"model": "gpt-4o-mini", "messages": list(messages)}
        lines.append({"run_id": run_id, "at": start + turn, "path": CHAT, "request": request, "response": response})
        messages.append(response["choices"][0]["message"])
        messages.append({"role": "tool", "tool_call_id": call[0], "content": '{"status": "error", "data": null}'})
    return lines


# Caps a long healthy session stays under: the detectors that judge behaviour still run at their defaults.
PERMISSIVE = {
    "guard": {
        "detectors": {
            "max_requests": {"limit": 10_000},
            "max_tokens": {"limit": 1_000_000_000},
            "timeout": {"seconds": 1_000_000},
            "budget": {"run_usd": 1_000_000},
        }
    }
}


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)
