"""Claude Code session transcripts (`~/.claude/projects/<dir>/<session>.jsonl`) as the Anthropic
Messages calls the CLI made.

Each line is one entry: `user` (the user's text, or `tool_result` blocks), `assistant` (one content
block of a model answer: Claude Code writes an answer's blocks as they stream, one line each, all
with the answer's `message.id`), and bookkeeping (`queue-operation`, `summary`, `file-history-snapshot`,
`attachment`, `system`) that is not sent to the model. So:

- every distinct assistant `message.id` is one model call; its lines are merged into one message,
  with the usage of its last line (as recorded, cache reads and writes included);
- consecutive user entries are one user message (the tool results of one answer go back together);
- the request of a call is the conversation before it, from the last compaction on (after a
  `compact_boundary` Claude Code sends the summary and what follows, not the old turns);
- its time is the time of the entry before the answer (when the request left), else the answer's;
- a subagent's transcript (`isSidechain`) is a conversation of its own: a file of main entries
  reads those only, a file of sidechain entries (`agent-*.jsonl`) is read as its own session;
  an answer with nothing recorded before it (Claude Code's "Warmup" subagents, whose prompt is not
  written) is left out;
- answers Claude Code made up itself (model `<synthetic>`, API error notes) are no model call.

An answer recorded without usage (an export's: `claude_export`) gets the usage Claude Code's prompt
cache would have given it, rebuilt by `usage` and marked so (the session's `usage` in sessions.json,
each exchange's `usage_reconstructed`).

The system prompt and tool schemas are not in the transcript: `tools` lists the tools the session calls
by name, with an open schema. (The build scrubs secrets from every line it writes: `redact`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import orjson

from bench.corpus import usage
from bench.corpus.readers import Context
from bench.corpus.session import Session, Turn, iso_epoch


def _entries(raw: bytes) -> list[dict[str, Any]]:
    """The conversation's entries, in order (a line that is not JSON is skipped: fail open)."""
    entries = []
    for line in raw.splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    sidechain = [e for e in entries if e.get("type") in {"user", "assistant"} and e.get("isSidechain")]
    main = [e for e in entries if not e.get("isSidechain")]
    return main if any(e.get("type") in {"user", "assistant"} for e in main) else sidechain


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def _made_up(message: dict[str, Any], entry: dict[str, Any]) -> bool:
    return message.get("model") == "<synthetic>" or bool(entry.get("isApiErrorMessage"))


class _Conversation:
    """The messages as Claude Code sent them, built entry by entry."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.turns: list[Turn] = []
        self.by_id: dict[str, Turn] = {}
        self.start = 0
        self.last_at: float | None = None

    def user(self, content: Any) -> None:
        if len(self.messages) > self.start and self.messages[-1]["role"] == "user":
            self.messages[-1]["content"] = _blocks(self.messages[-1]["content"]) + _blocks(content)
        else:
            self.messages.append({"role": "user", "content": content})

    def assistant(self, message: dict[str, Any], at: float | None) -> None:
        turn = self.by_id.get(str(message.get("id")))
        if turn is None:  # a new answer: one model call
            self.messages.append({"role": "assistant", "content": []})
            turn = Turn(len(self.messages) - 1, at=self.last_at or at, response_id=message.get("id"), start=self.start)
            self.turns.append(turn)
            if message.get("id"):
                self.by_id[str(message["id"])] = turn
        self.messages[turn.index]["content"].extend(_blocks(message.get("content")))
        turn.usage = message.get("usage") or turn.usage
        turn.response_model = message.get("model") or turn.response_model
        turn.finish_reason = message.get("stop_reason") or turn.finish_reason

    def compacted(self) -> None:
        self.start = len(self.messages)
        self.by_id.clear()


def read(raw: bytes, ctx: Context, name: str) -> Iterator[Session]:
    entries = _entries(raw)
    talk = _Conversation()
    for entry in entries:
        kind, message = entry.get("type"), entry.get("message") or {}
        if kind == "system" and entry.get("subtype") == "compact_boundary":
            talk.compacted()
        elif kind == "user" and "content" in message:
            talk.user(message["content"])
        elif kind == "assistant" and not _made_up(message, entry):
            talk.assistant(message, iso_epoch(entry.get("timestamp")))
        talk.last_at = iso_epoch(entry.get("timestamp")) or talk.last_at
    talk.turns = [turn for turn in talk.turns if turn.index > turn.start]  # a "Warmup" prompt is not recorded
    if not talk.turns:
        return
    used = {
        b["name"] for m in talk.messages for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"
    }
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in sorted(used)] or None
    model = ctx.model or next((t.response_model for t in talk.turns if t.response_model), None) or "unknown"
    parts = PurePosixPath(ctx.path).parts
    short = name if name.startswith("agent-") else name[:8]
    instance = f"{parts[ctx.instance_dir]}__{short}" if ctx.instance_dir is not None else name
    sidechain = any(e.get("isSidechain") for e in entries)
    version = next((e.get("version") for e in entries if e.get("version")), None)
    session = Session(
        f"{ctx.source}/{instance}", ctx.source, ctx.family, "function-calling", model, talk.messages,
        talk.turns, tools=tools, outcome=ctx.outcomes.get(instance), api="messages",
        meta={"subagent": sidechain or None, "version": version},
    )  # fmt: skip
    filled = usage.reconstruct(session)
    if filled:
        session.meta["usage"] = "reconstructed" if filled == len(talk.turns) else f"reconstructed for {filled} calls"
    yield session
