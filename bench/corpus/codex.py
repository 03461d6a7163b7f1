"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) as the Responses API calls the
CLI made.

Each line is `{timestamp, type, payload}`: `session_meta` (the session id and the base
`instructions`), `turn_context` (the model), `response_item` (one item of the conversation: a
`message` of the user, developer or assistant, `reasoning`, a `function_call` / `custom_tool_call` /
`local_shell_call` and its `..._output`), `event_msg` (UI events; `token_count` carries the usage of
the call that just ended) and `compacted` (the context was summarised). Codex sends the whole
conversation on every call (`store: false`), so:

- a call's output is the run of model items (assistant message, reasoning, tool calls) that follows
  an input item; the next input item, or a `token_count` with usage, ends it;
- its request is every item before its output, since the last compaction (after which the input is
  the compacted history Codex recorded, else its summary as a user message), with the session's
  instructions and the tools it calls (by name: the schemas are not recorded);
- its usage is the `last_token_usage` of the `token_count` that ends it, as the Responses API
  reports it (`input_tokens_details.cached_tokens`), its time that of the entry before its output.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from bench.corpus.readers import Context
from bench.corpus.session import Session, Turn, iso_epoch

MODEL_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"})


def _is_output(item: dict[str, Any]) -> bool:
    return item.get("type") in MODEL_ITEMS or (item.get("type") == "message" and item.get("role") == "assistant")


def _usage(info: dict[str, Any]) -> dict[str, Any] | None:
    last = info.get("last_token_usage")
    if not isinstance(last, dict):
        return None
    return {
        "input_tokens": last.get("input_tokens", 0),
        "input_tokens_details": {"cached_tokens": last.get("cached_input_tokens", 0)},
        "output_tokens": last.get("output_tokens", 0),
        "output_tokens_details": {"reasoning_tokens": last.get("reasoning_output_tokens", 0)},
        "total_tokens": last.get("total_tokens", 0),
    }


class _Rollout:
    """The items Codex sent, and the calls cut out of them, built line by line."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.turns: list[Turn] = []
        self.open: Turn | None = None  # the call whose output is being read
        self.start = 0
        self.last_at: float | None = None

    def item(self, item: dict[str, Any], at: float | None) -> None:
        if _is_output(item):
            if self.open is None:
                self.open = Turn(len(self.items), at=self.last_at or at, start=self.start)
                self.turns.append(self.open)
        else:
            self.open = None
        self.items.append(item)

    def ended(self, usage: dict[str, Any] | None) -> None:
        if self.open is not None:
            self.open.usage = usage
            self.open = None

    def compacted(self, payload: dict[str, Any]) -> None:
        self.open = None
        self.start = len(self.items)
        history = payload.get("replacement_history")
        summary = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": payload.get("message")}],
        }
        self.items.extend(history if isinstance(history, list) else [summary])


def read(raw: bytes, ctx: Context, name: str) -> Iterator[Session]:
    rollout, meta, model = _Rollout(), {}, ctx.model
    for line in raw.splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        kind, payload = entry.get("type"), entry.get("payload")
        if not isinstance(payload, dict):
            continue
        at = iso_epoch(entry.get("timestamp"))
        if kind == "session_meta":
            meta = payload
        elif kind == "turn_context" and not ctx.model:
            model = payload.get("model") or model
        elif kind == "response_item":
            rollout.item(payload, at)
        elif kind == "event_msg" and payload.get("type") == "token_count" and isinstance(payload.get("info"), dict):
            rollout.ended(_usage(payload["info"]))
        elif kind == "compacted":
            rollout.compacted(payload)
        rollout.last_at = at or rollout.last_at
    turns = [turn for turn in rollout.turns if turn.index > turn.start]
    if not turns:
        return
    for turn, after in zip(turns, [*(t.index for t in turns[1:]), len(rollout.items)], strict=True):
        turn.stop = next((i for i in range(turn.index, after) if not _is_output(rollout.items[i])), after)
    named = {i.get("name") for i in rollout.items if i.get("type") in {"function_call", "custom_tool_call"}}
    tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in sorted(filter(None, named))]
    base = meta.get("base_instructions")
    instructions = meta.get("instructions") or (base.get("text") if isinstance(base, dict) else None)
    instance = str(meta.get("id") or name)
    yield Session(
        f"{ctx.source}/{instance}", ctx.source, ctx.family, "function-calling", model or "unknown", rollout.items,
        turns, tools=tools or None, outcome=ctx.outcomes.get(instance), api="responses", system=instructions,
        meta={"cli_version": meta.get("cli_version"), "originator": meta.get("originator")},
    )  # fmt: skip
