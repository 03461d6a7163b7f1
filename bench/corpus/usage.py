"""Usage for Claude Code answers recorded without it (claude-code-exporter's Markdown drops it), rebuilt
as Claude Code's prompt cache would have spent it, and marked as such.

Claude Code sends each call with cache breakpoints up to its last message, so a call reads from the cache
the prompt the call before it sent and writes what is new: the answer before it and the results or text
that followed. So, per call of a session, in order:

- its prompt's tokens are the proxy's own estimate of the request (`estimated_input_tokens`, what the
  proxy counts live for an answer without usage: characters / 4 and 3 per message), scaled by `SCALE`,
  plus `UNSEEN`, the system prompt and tool schemas Claude Code sends and no transcript records;
- `cache_read_input_tokens` is what the call before sent: `UNSEEN` always (a compaction keeps the
  system prompt), its whole prompt when this call extends it (no compaction between them); nothing when
  the call before left more than `CACHE_LIFE` (5 minutes, from the recorded times) earlier, or for a
  session's first call;
- `input_tokens` is `UNCACHED` (the few tokens after the last breakpoint), the rest of the prompt is
  `cache_creation_input_tokens` (written, 5-minute);
- `output_tokens` is the proxy's estimate of the answer (its text, thinking and tool calls), scaled.

`SCALE` and `UNSEEN` are measured, not known: the median fit of recorded input tokens against the
proxy's estimate over the 36 claude-code-swe-contextbench sessions (Claude Code 2.0.67, Sonnet 4.5).
`usage_check` compares the result with recorded usage (bench/corpus/README.md gives the error). Recorded
usage is never replaced: only a turn without any is filled, and the turn says so (`Turn.reconstructed`;
its exchange carries `usage_reconstructed: true`).
"""

from __future__ import annotations

from typing import Any

import orjson

from bench.corpus.session import Session, Turn, exchanges
from runguard.proxy.guard.costs.tokens import TokenEstimator
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.registry import adapter_for

CACHE_LIFE = 300.0  # seconds: Anthropic's default (5-minute) cache entry, refreshed by each read
UNCACHED = 3  # input tokens after Claude Code's last breakpoint (one message's framing, as the proxy counts it)
SCALE = 1.45  # Claude's tokens per token of the proxy's estimate (characters / 4 undercounts code and JSON)
UNSEEN = 25_500  # the system prompt and tool schemas' tokens (the fit's intercept; Harbor's runs: 7,000-15,000)
API = "messages"


def _said(content: Any) -> str:
    """What an answer's output tokens are spent on: its text, thinking and tool calls (name and input)."""
    parts = []
    for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in {"text", "thinking"}:
            parts.append(str(block.get("text") or block.get("thinking") or ""))
        elif kind == "tool_use":
            parts.append(str(block.get("name") or "") + orjson.dumps(block.get("input")).decode())
    return "".join(parts)


def _read(before: tuple[Turn, int] | None, turn: Turn) -> int:
    """The tokens `turn`'s call reads from the cache: what the call before it sent, when still cached (the
    system prompt alone after a compaction)."""
    if before is None:
        return 0
    last, prompt = before
    if last.at is not None and turn.at is not None and turn.at - last.at > CACHE_LIFE:
        return 0
    return prompt if last.start == turn.start else UNSEEN


def reconstruct(session: Session) -> int:
    """Fill the usage of `session`'s turns that have none (a Messages session); the number filled."""
    adapter = adapter_for(API)
    if session.api != API or adapter is None or all(turn.usage is not None for turn in session.turns):
        return 0
    tokens, filled = TokenEstimator(), 0
    before: tuple[Turn, int] | None = None
    for turn, exchange in zip(session.turns, exchanges(session, 0.0), strict=True):
        estimate = adapter.parse_request(orjson.dumps(exchange["request"]), RequestContext()).estimated_input_tokens
        prompt = UNSEEN + round(estimate * SCALE)
        if turn.usage is None:
            read = min(_read(before, turn), prompt)
            uncached = min(UNCACHED, prompt - read)
            said = tokens.count(_said(exchange["response"]["content"]), session.model, adapter.api)
            output = round(said * SCALE)
            turn.usage = {
                "input_tokens": uncached,
                "cache_creation_input_tokens": prompt - read - uncached,
                "cache_read_input_tokens": read,
                "output_tokens": output,
            }
            turn.reconstructed, filled = True, filled + 1
        before = (turn, prompt)
    return filled
