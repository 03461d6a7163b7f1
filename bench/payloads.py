"""Realistic request and response bodies for the three APIs, shared by the fake upstream and the load client.

An agent loop on the wire: a system prompt, tool declarations, a task, then
one turn per step (an assistant tool call and its result). `tool_call(j)` and
`tool_result(j)` are deterministic, so the client can rebuild exactly the
conversation the upstream's answers (variant j = step j's call) produce, and
every call differs from the others in tool arguments and result, as a healthy
run's do (no detector should trip on it).

Sizes: a "small" request is the loop after one step (about 2 KB); a "large"
one adds a `read_file` result of about 300 KB; a "long" one is the loop after
300 steps (about 300 KB of history, where the growth run ends). Shapes follow /work/shared/wire-formats.md.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any, Literal

import orjson

Api = Literal["chat", "responses", "gemini"]
APIS: tuple[Api, ...] = ("chat", "responses", "gemini")
Size = Literal["small", "large", "long"]
SIZES: tuple[Size, ...] = ("small", "large", "long")
LONG_STEPS = 300  # steps of history in a "long" request
OPENAI_MODEL = "gpt-4.1-mini"  # a 1M-token window, so a 300 KB request is no context_window warning
GEMINI_MODEL = "gemini-2.5-flash"
NONCE = b"NONCE_000000000000"  # fixed width: the client swaps in a per-request value with bytes.replace
LARGE_BYTES = 300_000
OPENAI_KEY = "sk-bench-0123456789abcdef"
GEMINI_KEY = "AIza-bench-0123456789abcdef"

SYSTEM_PROMPT = (
    "You are a research assistant working for an engineering team. Use the tools to find facts, read the "
    "files you are pointed at and query the warehouse when numbers are needed. Cite every source you use by "
    "its URL or path. Prefer primary sources over summaries, and never invent a number: if a query fails, "
    "say so and try a different approach rather than repeating it. When the task is complete, answer with a "
    "short report: findings first, then open questions, then the sources. Keep the report under 400 words."
)
TASK = (
    "Task NONCE_000000000000: compare the p99 latency of the checkout service before and after last week's "
    "release, find the change that explains the difference, and propose a fix."
)

_TOOLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "search_web",
        "Search the web; returns titles, URLs and snippets.",
        {"query": {"type": "string"}, "max_results": {"type": "integer"}},
    ),
    ("read_file", "Read a file of the repository.", {"path": {"type": "string"}, "offset": {"type": "integer"}}),
    ("run_sql", "Run a read-only SQL query on the metrics warehouse.", {"query": {"type": "string"}}),
    ("fetch_url", "Fetch a web page as text.", {"url": {"type": "string"}}),
)
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "den", "gar", "pol", "qui", "zen", "bri", "tor", "lex")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))


def words(rng: random.Random, count: int) -> str:
    """`count` made-up words (a query's, a snippet's), drawn from `rng`."""
    return " ".join(_word(rng) for _ in range(count))


@dataclass(frozen=True, slots=True)
class Call:
    call_id: str
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return orjson.dumps(self.arguments).decode()


@functools.lru_cache(maxsize=4096)
def tool_call(step: int) -> Call:
    """Step `step`'s call: tools rotate, arguments are fresh words (no two calls alike)."""
    rng = random.Random(step * 7919 + 1)
    name = _TOOLS[step % len(_TOOLS)][0]
    args: dict[str, Any]
    if name == "search_web":
        args = {"query": words(rng, 6), "max_results": 5}
    elif name == "read_file":
        args = {"path": f"src/{_word(rng)}/{_word(rng)}_{step}.py", "offset": 0}
    elif name == "run_sql":
        args = {"query": f"SELECT {_word(rng)}, p99_ms FROM {_word(rng)}_{step} WHERE day > '{_word(rng)}'"}
    else:
        args = {"url": f"https://{_word(rng)}.example.com/{_word(rng)}/{step}"}
    return Call(f"call_{step:06d}_{rng.getrandbits(32):08x}", name, args)


@functools.lru_cache(maxsize=4096)
def tool_result(step: int) -> str:
    """Step `step`'s tool result: a JSON document of about 800 bytes, different every step."""
    rng = random.Random(step * 104729 + 3)
    items = [
        {"title": words(rng, 4), "url": f"https://{_word(rng)}.example.com/{step}/{i}", "snippet": words(rng, 16)}
        for i in range(3)
    ]
    return orjson.dumps({"step": step, "results": items, "took_ms": rng.randint(20, 400)}).decode()


@functools.lru_cache(maxsize=4)
def big_text(size: int) -> str:
    """About `size` characters of source-like text (a file an agent read)."""
    rng = random.Random(size)
    lines: list[str] = []
    total = 0
    while total < size:
        line = f"    {_word(rng)} = {_word(rng)}({words(rng, rng.randint(2, 9))!r})  # {words(rng, 3)}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


BIG_CALL = Call("call_big_read", "read_file", {"path": "src/checkout/service.py", "offset": 0})


def request_path(api: Api, stream: bool) -> str:
    if api == "chat":
        return "/v1/chat/completions"
    if api == "responses":
        return "/v1/responses"
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{GEMINI_MODEL}:{method}"


def request_headers(api: Api) -> dict[str, str]:
    auth = {"x-goog-api-key": GEMINI_KEY} if api == "gemini" else {"Authorization": f"Bearer {OPENAI_KEY}"}
    return {"Content-Type": "application/json", **auth}


def _turns(steps: int, big_result: int) -> list[tuple[Call, str]]:
    turns = [(tool_call(j), tool_result(j)) for j in range(steps)]
    if big_result:
        turns.append((BIG_CALL, big_text(big_result)))
    return turns


def _chat(turns: list[tuple[Call, str]], stream: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": TASK}]
    for call, result in turns:
        fn = {"name": call.name, "arguments": call.arguments_json}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call.call_id, "type": "function", "function": fn}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call.call_id, "content": result})
    tools = [
        {
            "type": "function",
            "function": {"name": n, "description": d, "parameters": {"type": "object", "properties": p}},
        }
        for n, d, p in _TOOLS
    ]
    body: dict[str, Any] = {"model": OPENAI_MODEL, "messages": messages, "tools": tools, "temperature": 0.2}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _responses(turns: list[tuple[Call, str]], stream: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for call, result in turns:
        items.append(
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments_json}
        )
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    tools = [
        {"type": "function", "name": n, "description": d, "parameters": {"type": "object", "properties": p}}
        for n, d, p in _TOOLS
    ]
    body: dict[str, Any] = {"model": OPENAI_MODEL, "instructions": SYSTEM_PROMPT, "input": items, "tools": tools}
    if stream:
        body["stream"] = True
    return body


def _gemini(turns: list[tuple[Call, str]]) -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": TASK}]}]
    for call, result in turns:
        contents.append({"role": "model", "parts": [{"functionCall": {"name": call.name, "args": call.arguments}}]})
        payload: Any = orjson.loads(result) if result.startswith("{") else {"content": result}
        contents.append(
            {"role": "user", "parts": [{"functionResponse": {"name": call.name, "response": {"result": payload}}}]}
        )
    declarations = [
        {
            "name": n,
            "description": d,
            "parameters": {"type": "OBJECT", "properties": {k: {"type": v["type"].upper()} for k, v in p.items()}},
        }
        for n, d, p in _TOOLS
    ]
    return {
        "contents": contents,
        "systemInstruction": {"role": "user", "parts": [{"text": SYSTEM_PROMPT}]},
        "tools": [{"functionDeclarations": declarations}],
        "generationConfig": {"temperature": 0.2},
    }


def conversation_request(api: Api, steps: int, stream: bool, big_result: int = 0) -> bytes:
    """The request an agent sends after `steps` tool turns (plus one big file read if asked)."""
    turns = _turns(steps, big_result)
    if api == "chat":
        return orjson.dumps(_chat(turns, stream))
    return orjson.dumps(_responses(turns, stream) if api == "responses" else _gemini(turns))


def scenario_request(api: Api, stream: bool, size: Size) -> bytes:
    if size == "long":
        return conversation_request(api, LONG_STEPS, stream)
    return conversation_request(api, 1, stream, LARGE_BYTES if size == "large" else 0)
