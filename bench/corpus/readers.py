"""Readers of the recording formats in the corpus: each turns one recorded file into `Session`s.

- `mini_swe`: mini-swe-agent's `*.traj.json` (text protocol: one bash block per answer); each
  assistant message keeps the raw provider response (`extra.response`) with its time and usage.
- `swe_agent`: SWE-agent's `*.traj` (0.x text protocol, or 1.x function calling); `history` holds
  the messages as the agent kept them; no per-call times or usage.
- `tau_bench`: tau-bench's historical trajectories (a JSON list of runs, function calling, OpenAI
  Chat messages); no times or usage.
- `chat_list`: a JSON list of conversations with their tool schemas (OpenHands on SWE-Gym); no
  times or usage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from bench.corpus.session import Session, Turn, assistant_turns

Reader = Callable[[bytes, "Context", str], Iterator[Session]]


class Context:
    """What a reader needs beyond the file: the source's name, family, model and outcomes."""

    def __init__(
        self,
        source: str,
        family: str,
        model: str | None,
        outcomes: dict[str, str],
        keep: int | None = None,
        instance_dir: int | None = None,
    ) -> None:
        self.source = source
        self.family = family
        self.model = model
        self.outcomes = outcomes
        self.keep_observations = keep
        self.instance_dir = instance_dir  # which folder of a file's path names its task (else the file's name)
        self.path = ""  # the file being read, set before each


def _tools(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The function tools the session calls (names as recorded; their schemas are not in the recording)."""
    names = sorted({call["function"]["name"] for m in messages for call in m.get("tool_calls") or []})
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names] or None


ROLES = {"system", "user", "assistant", "tool"}


def _wire(message: dict[str, Any]) -> dict[str, Any]:
    """A recorded message as the agent sent it: role, content, tool calls and the id a tool result answers."""
    wire: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if message.get("tool_calls"):
        wire["tool_calls"] = message["tool_calls"]
    if message["role"] == "tool":
        wire["tool_call_id"] = message.get("tool_call_id") or (message.get("tool_call_ids") or ["call"])[0]
    return wire


def mini_swe(raw: bytes, ctx: Context, name: str) -> Iterator[Session]:
    doc = orjson.loads(raw)
    recorded = [m for m in doc["messages"] if m["role"] in ROLES]  # not mini's closing "exit" note
    messages = [_wire(m) for m in recorded]
    turns = []
    for index, message in enumerate(recorded):
        if message["role"] != "assistant":
            continue
        response = (message.get("extra") or {}).get("response") or {}
        choices = response.get("choices") or [{}]
        turns.append(
            Turn(
                index,
                at=float(response["created"]) if "created" in response else None,
                usage=response.get("usage"),
                response_model=response.get("model"),
                finish_reason=choices[0].get("finish_reason"),
            )
        )
    instance = doc.get("instance_id") or name
    model = ctx.model or doc["info"]["config"]["model"]["model_name"]
    model = model.removeprefix("openai/")  # litellm's provider prefix: OpenAI is sent the bare id
    tools = _tools(messages)
    yield Session(
        f"{ctx.source}/{instance}", ctx.source, ctx.family, "function-calling" if tools else "text", model,
        messages, turns, tools=tools, outcome=ctx.outcomes.get(instance),
        meta={"exit_status": doc["info"].get("exit_status")},
    )  # fmt: skip


def swe_agent(raw: bytes, ctx: Context, name: str) -> Iterator[Session]:
    doc = orjson.loads(raw)
    history = [
        m
        for m in doc.get("history") or []
        if m.get("agent", "primary") in {"primary", "main"}
        and not (m["role"] == "assistant" and str(m.get("content")).startswith("Exit due to"))  # SWE-agent's own
    ]
    messages = [_wire(m) for m in history]
    demo = {i for i, m in enumerate(history) if str(m.get("is_demo")).lower() == "true"}
    turns = assistant_turns(messages)
    if not turns:
        return
    config = doc.get("replay_config")
    config = orjson.loads(config) if isinstance(config, str) else config
    model = ctx.model or ((config or {}).get("agent", {}).get("model", {}).get("name")) or "unknown"
    instance = name
    tools = _tools(messages)
    yield Session(
        f"{ctx.source}/{instance}", ctx.source, ctx.family, "function-calling" if tools else "text", model,
        messages, turns, tools=tools, outcome=ctx.outcomes.get(instance),
        meta={"exit_status": (doc.get("info") or {}).get("exit_status")},
        keep_observations=ctx.keep_observations, demo=demo,
    )  # fmt: skip


def tau_bench(raw: bytes, ctx: Context, name: str) -> Iterator[Session]:
    runs = orjson.loads(raw)
    every = [m for run in runs for m in run["traj"]]
    tools = _tools(every)
    for run in runs:
        messages = [dict(m) for m in run["traj"]]
        turns = assistant_turns(messages)
        yield Session(
            f"{ctx.source}/task-{run['task_id']}-trial-{run['trial']}", ctx.source, ctx.family,
            "function-calling", ctx.model or "gpt-4o", messages, turns, tools=tools,
            outcome=f"reward {float(run['reward']):.1f}",
        )  # fmt: skip


def chat_list(raw: bytes, ctx: Context, name: str) -> Iterator[Session]:
    """A JSON list of recorded conversations, each `{instance_id, messages, tools?, resolved?, run_id?}`
    (the SWE-Gym OpenHands sample: OpenAI Chat messages with the agent's real tool schemas)."""
    for item in orjson.loads(raw):
        messages = [_wire(m) for m in item["messages"] if m["role"] in ROLES]
        turns = assistant_turns(messages)
        model = ctx.model or str(item.get("run_id") or "unknown").split("_")[0]
        tools = item.get("tools") or _tools(messages)
        resolved = item.get("resolved")
        yield Session(
            f"{ctx.source}/{item['instance_id']}", ctx.source, ctx.family,
            "function-calling" if tools else "text", model, messages, turns, tools=tools,
            outcome=None if resolved is None else ("resolved" if resolved else "unresolved"),
        )  # fmt: skip


READERS: dict[str, Reader] = {
    "mini-swe-agent": mini_swe,
    "swe-agent": swe_agent,
    "tau-bench": tau_bench,
    "chat-list": chat_list,
}
