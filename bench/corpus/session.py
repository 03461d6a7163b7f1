"""One recorded agent session, and the wire exchanges it becomes (docs/records.md's JSON-lines format).

A session is the conversation as the agent kept it: system and user turns, the assistant's turns
(text, or OpenAI `tool_calls`) and tool results (`role: tool`). Request i is every message before
the i-th assistant turn, as the agent sent it; its response is that assistant turn, with the
recorded usage and model when there are any (no model is invented; usage a recording lacks is, for
Claude Code, rebuilt by `usage` and marked `usage_reconstructed` on the exchange). The request's time is the
recorded one when there is one, else the session's assumed pace.

A session whose `api` is `messages` (a coding-agent CLI speaking Anthropic Messages) holds
Anthropic messages (content blocks, `tool_use` / `tool_result`) and its `system` prompt apart;
its requests go to `/v1/messages` and its responses are the recorded Anthropic messages. One whose
`api` is `responses` (Codex CLI) holds Responses API items; a call's output is several items
(`index` to `stop`), its request the items before them with the `system` text as `instructions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/anthropic/v1/messages"  # the explicit prefix names Anthropic to any replay, old ones too
MAX_TOKENS = 32_000  # Claude Code's default max_tokens for its main model calls
START = 1_700_000_000.0  # the first request of a session without recorded times


@dataclass(slots=True)
class Turn:
    """One model call: the assistant message it produced, and what was recorded of it."""

    index: int  # position of the assistant message in `Session.messages`
    at: float | None = None  # epoch seconds, when recorded
    usage: dict[str, Any] | None = None
    response_model: str | None = None
    finish_reason: str | None = None
    response_id: str | None = None  # the provider's id of the recorded answer (Anthropic `msg_...`)
    start: int = 0  # the first message sent with it (a CLI that compacted its context sends only what follows)
    stop: int | None = None  # Responses: the index after the call's last output item
    reconstructed: bool = False  # `usage` was rebuilt from the conversation (`usage.reconstruct`), not recorded


@dataclass(slots=True)
class Session:
    id: str
    source: str
    family: str
    protocol: str  # "text" or "function-calling"
    model: str
    messages: list[dict[str, Any]]
    turns: list[Turn]
    tools: list[dict[str, Any]] | None = None
    outcome: str | None = None  # e.g. resolved / unresolved / reward 1.0
    meta: dict[str, Any] = field(default_factory=dict)
    keep_observations: int | None = None  # SWE-agent 0.x's LastNObservations: older results elided when sent
    demo: set[int] = field(default_factory=set)  # indices of demonstration messages (never elided)
    api: str = "chat"  # "chat" (OpenAI Chat Completions), "messages" (Anthropic Messages) or "responses"
    system: str | list[dict[str, Any]] | None = None  # the system prompt or instructions, when recorded

    @property
    def timed(self) -> bool:
        return all(turn.at is not None for turn in self.turns)


def _response(session: Session, turn: Turn, at: float) -> dict[str, Any]:
    message = session.messages[turn.index]
    wire: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        wire["tool_calls"] = message["tool_calls"]
    finish = turn.finish_reason or ("tool_calls" if message.get("tool_calls") else "stop")
    response: dict[str, Any] = {
        "id": f"{session.id}-{turn.index}",
        "object": "chat.completion",
        "created": int(at),
        "model": turn.response_model or session.model,
        "choices": [{"index": 0, "message": wire, "finish_reason": finish}],
    }
    if turn.usage is not None:
        response["usage"] = turn.usage
    return response


def _sent(session: Session, end: int) -> list[dict[str, Any]]:
    """The messages before `end` as the agent sent them: with SWE-agent 0.x's LastNObservations, every
    user message but the first (the issue) and the last n (demonstrations aside) reads
    `Old output omitted (N lines)`."""
    messages = session.messages[:end]
    if session.keep_observations is None:
        return messages
    users = [i for i, m in enumerate(messages) if m["role"] == "user" and i not in session.demo]
    kept = {*users[:1], *users[len(users) - session.keep_observations :]}
    return [
        {**m, "content": f"Old output omitted ({len(str(m['content']).splitlines())} lines)"}
        if i in users and i not in kept
        else m
        for i, m in enumerate(messages)
    ]


def _anthropic(session: Session, turn: Turn) -> tuple[dict[str, Any], dict[str, Any]]:
    """An Anthropic Messages request (the conversation before the turn) and its recorded answer."""
    request: dict[str, Any] = {"model": session.model, "max_tokens": MAX_TOKENS}
    if session.system:
        request["system"] = session.system
    request["messages"] = session.messages[turn.start : turn.index]
    if session.tools:
        request["tools"] = session.tools
    content = session.messages[turn.index]["content"]
    used = any(block.get("type") == "tool_use" for block in content if isinstance(block, dict))
    response: dict[str, Any] = {
        "id": turn.response_id or f"msg_{turn.index}",
        "type": "message",
        "role": "assistant",
        "model": turn.response_model or session.model,
        "content": content,
        "stop_reason": turn.finish_reason or ("tool_use" if used else "end_turn"),
        "stop_sequence": None,
    }
    if turn.usage is not None:
        response["usage"] = turn.usage
    return request, response


def _responses(session: Session, turn: Turn, at: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Responses API request (the items before the call, as Codex sends them: `store` off) and its
    recorded output."""
    request: dict[str, Any] = {"model": session.model}
    if session.system:
        request["instructions"] = session.system
    request |= {"input": session.messages[turn.start : turn.index], "store": False}
    if session.tools:
        request["tools"] = session.tools
    response: dict[str, Any] = {
        "id": f"resp_{turn.index}",
        "object": "response",
        "created_at": int(at),
        "status": "completed",
        "model": turn.response_model or session.model,
        "output": session.messages[turn.index : turn.stop],
    }
    if turn.usage is not None:
        response["usage"] = turn.usage
    return request, response


def iso_epoch(stamp: object) -> float | None:
    """Epoch seconds of an ISO 8601 time as CLIs record them (`2025-11-19T22:54:26.919Z`), else None."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def exchanges(session: Session, pace: float) -> Iterator[dict[str, Any]]:
    """The session's model calls as recorded exchanges, in order; `pace` seconds apart when the
    recording has no times."""
    for number, turn in enumerate(session.turns):
        at = turn.at if turn.at is not None else START + number * pace
        if session.api == "messages":
            path, (request, response) = MESSAGES_PATH, _anthropic(session, turn)
        elif session.api == "responses":
            path, (request, response) = RESPONSES_PATH, _responses(session, turn, at)
        else:
            path, request = CHAT_PATH, {"model": session.model, "messages": _sent(session, turn.index)}
            if session.tools:
                request["tools"] = session.tools
            response = _response(session, turn, at)
        exchange = {
            "run_id": session.id,
            "at": at,
            "path": path,
            "request": request,
            "response": response,
            "status": 200,
        }
        if turn.reconstructed:
            exchange["usage_reconstructed"] = True  # replay ignores it: it tells a reader the usage is not recorded
        yield exchange


def assistant_turns(messages: list[dict[str, Any]]) -> list[Turn]:
    """A turn for each assistant message that follows a request (not one that opens the conversation)."""
    return [Turn(index) for index, message in enumerate(messages) if message["role"] == "assistant" and index > 0]
