"""Claude Code sessions exported to Markdown by `claude-code-exporter` ("Full Conversation" mode), read
as the transcripts they were made from and converted by `claude_code`.

The export writes a header (`**Session ID**`, the project path) and then one section per transcript
entry: `### User` or `### Assistant`, a `> M/D/YYYY, H:MM:SS AM` line with the entry's local time,
and its content, a JSON array of content blocks (text, thinking, tool_use, tool_result) or, for a
prompt the user typed, the plain text. What the export drops: the answers' ids, model and usage,
and the bookkeeping entries. So:

- a run of `Assistant` sections is one answer (Claude Code writes an answer's blocks one entry
  each; two answers always have a user entry, the tool results or a prompt, between them);
- Claude Code's compaction leaves a user entry that opens with its summary sentence
  (`This session is being continued from a previous conversation`): the request starts again there;
- Claude Code logs part of a conversation again when a session is resumed: a section older than
  one already read, whose tool calls or results were all read already, or the same as the section
  just before it, is that copy and skipped;
- times are the recorder's local clock, read as UTC (the spacing between calls is what counts);
- a subagent's export (session id `agent-...`) lacks the prompt it was given: when its answers get
  replies, a user message saying so (`MISSING_PROMPT`) stands in for it, so its first call is sent
  as small as it was; an export of answers alone (Claude Code's "Warmup") is no session.

Usage and model are not recorded: the usage is rebuilt as Claude Code's prompt cache would have spent it
(`usage`, marked `usage_reconstructed`; the proxy's own estimate of each prompt, the prefix the call before
sent read from the cache within 5 minutes), and the model is the source's `model` or `unknown` (unpriced:
none is invented). (The build scrubs secrets from every line it writes: `redact`.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from bench.corpus import claude_code
from bench.corpus.readers import Context
from bench.corpus.session import Session

SECTION = re.compile(r"^### (User|Assistant)\n> (\d{1,2}/\d{1,2}/\d{4}, \d{1,2}:\d{2}:\d{2} [AP]M)\n\n", re.M)
SESSION_ID = re.compile(r"\*\*Session ID\*\*: `([^`]+)`")
COMPACTED = "This session is being continued from a previous conversation"
MISSING_PROMPT = "[the subagent's prompt is not in the export]"


def _content(body: str) -> Any:
    """A section's content: its JSON array of content blocks, else the text the user typed."""
    text = body.strip().removesuffix("---").strip()
    if text.startswith("["):
        try:
            blocks = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
        if isinstance(blocks, list) and blocks and all(isinstance(b, dict) and "type" in b for b in blocks):
            return blocks
    return text


def _iso(local: str) -> str:
    return datetime.strptime(local, "%m/%d/%Y, %I:%M:%S %p").replace(tzinfo=UTC).isoformat()


def _ids(content: Any) -> set[str]:
    """The tool calls and results a section holds, by the call's id."""
    blocks = content if isinstance(content, list) else []
    return {f"{b['type']}:{b.get('id') or b.get('tool_use_id')}" for b in blocks if b.get("id") or b.get("tool_use_id")}


def entries(text: str, sidechain: bool) -> list[dict[str, Any]]:
    """The export's sections as Claude Code transcript entries (what `claude_code.read` reads)."""
    found: list[dict[str, Any]] = []
    marks = list(SECTION.finditer(text))
    answers, newest, read_ids = 0, "", set[str]()
    for mark, after in zip(marks, [*marks[1:], None], strict=True):
        role, content = mark.group(1).lower(), _content(text[mark.end() : after.start() if after else len(text)])
        at, ids = _iso(mark.group(2)), _ids(content)
        copied = found and found[-1]["type"] == role and found[-1]["message"]["content"] == content
        if at < newest or (ids and ids <= read_ids) or copied:  # a resumed session's copy of what was read
            continue
        newest, read_ids = at, read_ids | ids
        stamp = {"timestamp": at, "isSidechain": sidechain}
        if role == "user" and isinstance(content, str) and content.startswith(COMPACTED):
            found.append({"type": "system", "subtype": "compact_boundary", **stamp})
        if role == "assistant" and not (found and found[-1]["type"] == "assistant"):
            answers += 1
        message: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            message["id"] = f"export-{answers}"
        found.append({"type": role, "message": message, **stamp})
    if found and found[0]["type"] == "assistant" and any(e["type"] == "user" for e in found):
        prompt = {"role": "user", "content": MISSING_PROMPT}
        found.insert(
            0, {"type": "user", "message": prompt, "timestamp": found[0]["timestamp"], "isSidechain": sidechain}
        )
    return found


def read(raw: bytes, ctx: Context, name: str) -> Iterator[Session]:
    text = raw.decode("utf-8", errors="replace")
    named = SESSION_ID.search(text)
    session_id = named.group(1) if named else name
    sidechain = session_id.startswith("agent-")
    lines = b"\n".join(orjson.dumps(entry) for entry in entries(text, sidechain))
    yield from claude_code.read(lines, ctx, session_id if sidechain else session_id[:8])
