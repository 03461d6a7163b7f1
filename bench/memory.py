"""Memory a run takes in a sidecar's in-memory state, for two shapes of run.

    python -m bench.memory [--runs 2000] [--shape short|tools|both]

Drives runs through the guard in-process (`Guard` over a `MemoryState`, every
detector armed with the bench's limits, warn-only so that a long run goes on to
its end; its state changes as it would under `block`) and measures, with the
state kept:
- RSS per run: the process's resident memory before and after `--runs` runs,
  divided by their number (a collection first each time);
- one run's state: its fields, their deep `sys.getsizeof` size and their size
  as JSON (about what Redis holds).

Shapes:
- `short`: four requests a run, each the latency scenario's small chat request
  (one tool turn): a short agent loop;
- `tools`: thirty requests a run whose model calls three of eight tools at a time
  with 90-word arguments, each answered with a different 40-word result: a long
  run that calls many tools, where the detectors' windows fill up.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
from dataclasses import dataclass
from typing import Any

import orjson

from bench.payloads import OPENAI_MODEL, scenario_request, words
from bench.pipeline import guard_for
from bench.replies import body as reply_body
from bench.state_size import deep_size
from runguard.proxy.guard.guard import Guard
from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.providers.routes import Route, resolve
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state.memory import MemoryState

SHAPES = ("short", "tools")
TOOLS, AT_ONCE, STEPS = 8, 3, 30  # the `tools` shape


@dataclass
class Measured:
    shape: str
    runs: int
    requests_per_run: int
    rss_kb_per_run: float
    fields: int
    deep_bytes: int
    json_bytes: int


def _short() -> list[tuple[bytes, bytes]]:
    return [(scenario_request("chat", False, "small"), reply_body("chat", 1, None))] * 4


def _tools() -> list[tuple[bytes, bytes]]:
    """Each step's request (the task, then the previous step's calls and results) and its answer."""
    rng = random.Random(7)
    declared = [
        {"type": "function", "function": {"name": f"tool_{t}", "parameters": {"type": "object", "properties": {}}}}
        for t in range(TOOLS)
    ]
    opening: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a research agent."},
        {"role": "user", "content": "Find out."},
    ]
    turn: list[dict[str, Any]] = []
    steps = []
    for step in range(STEPS):
        request = orjson.dumps({"model": OPENAI_MODEL, "messages": opening + turn, "tools": declared})
        calls = [
            {
                "id": f"call_{step}_{i}",
                "type": "function",
                "function": {
                    "name": f"tool_{(step * AT_ONCE + i) % TOOLS}",
                    "arguments": orjson.dumps({"query": words(rng, 60), "notes": words(rng, 30)}).decode(),
                },
            }
            for i in range(AT_ONCE)
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        answer = {
            "id": f"chatcmpl-{step}",
            "object": "chat.completion",
            "model": OPENAI_MODEL,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300},
        }
        steps.append((request, orjson.dumps(answer)))
        results = [{"role": "tool", "tool_call_id": c["id"], "content": words(rng, 40)} for c in calls]
        turn = [message, *results]
    return steps


async def _run(
    guard: Guard, route: Route, adapter: Adapter, steps: list[tuple[bytes, bytes]], run_id: str, key: str
) -> None:
    for request, answer in steps:
        info = adapter.parse_request(request, RequestContext(route.model, None, False))
        ticket = await guard.admit(adapter, info, body=request, key_hash=key, header_run=run_id)
        seen = guard.response_seen(ticket, adapter.parse_response(answer), 200, 0.001)
        guard.inspect(ticket, seen)
        await guard.complete(ticket, seen, client_status=200)


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def measure(shape: str, runs: int) -> Measured:
    steps = _short() if shape == "short" else _tools()
    state = MemoryState(max_scopes=10 * runs + 1000)  # nothing evicted
    guard = guard_for(None, state=state, shadow=True)
    route = resolve("/v1/chat/completions")
    assert route is not None
    adapter = adapter_for(route.api)
    assert adapter is not None
    key = KeyHasher(b"bench-salt-bench-salt").hash("sk-bench-memory")
    await _run(guard, route, adapter, steps, "warm-up", key)  # imports, caches and the key's scopes
    gc.collect()
    before = _rss()
    for i in range(runs):
        await _run(guard, route, adapter, steps, f"run-{i}", key)
    gc.collect()
    after = _rss()
    fields = state._slots.get("run:run-0", {})  # the backend's own table, as `bench.state_size` reads it
    return Measured(
        shape,
        runs,
        len(steps),
        (after - before) / runs / 1024,
        len(fields),
        deep_size(fields),
        len(orjson.dumps(fields)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Memory a run takes in the in-memory state (in-process).")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--shape", choices=(*SHAPES, "both"), default="both")
    args = parser.parse_args()
    shapes = SHAPES if args.shape == "both" else (args.shape,)
    print(f"{'shape':8}{'runs':>8}{'requests':>10}{'RSS KB/run':>12}{'fields':>8}{'deep bytes':>12}{'JSON bytes':>12}")
    for shape in shapes:
        m = asyncio.run(measure(shape, args.runs))
        print(
            f"{m.shape:8}{m.runs:>8}{m.requests_per_run:>10}{m.rss_kb_per_run:>12.1f}"
            f"{m.fields:>8}{m.deep_bytes:>12}{m.json_bytes:>12}"
        )


if __name__ == "__main__":
    main()
