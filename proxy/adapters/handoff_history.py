"""openai-agents' nested handoff history (`RunConfig(nest_handoff_history=True)`).

After a handoff, the next agent gets the conversation so far as one assistant
message, a numbered transcript, in place of its items (`agents/handoffs/history.py`,
0.24):

    For context, here is the conversation so far between the user and the previous agent:
    <CONVERSATION HISTORY>
    1. user: I want a refund for order 42.
    2. {"arguments": "{}", "call_id": "call_1", "name": "transfer_to_billing", ...}
    </CONVERSATION HISTORY>

A message with a one-line string content is written `role: content`; anything
else as its JSON, on one line; the markers can be changed, the opening line
cannot. Such a conversation has no user message of its own, so without this it
had no root and the agent taken over ran apart from the run it continues. Its
root is the transcript's first user turn, as it was before the handoff.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.adapters.jsonish import text_of

# The opening line, and the one releases before 0.19 wrote.
PREAMBLES = (
    "For context, here is the conversation so far between the user and the previous agent:\n",
    "For context, here is the conversation so far:\n",
)


def carried_root(items: list[Any]) -> str | None:
    """The first user turn of the conversation a leading nested-history message carries, if the
    conversation opens with one (after its system messages)."""
    for item in items:
        role = item.get("role") if type(item) is dict else None
        if role in ("system", "developer"):
            continue
        if role != "assistant":
            return None  # the usual conversation: its own first user message is its root
        content = item.get("content")
        text = content if type(content) is str else text_of(content)
        return _first_user_turn(text) if text.startswith(PREAMBLES) else None
    return None


def _first_user_turn(transcript: str) -> str | None:
    for line in transcript.split("\n")[2:]:  # after the opening line and the start marker
        number, dot, entry = line.partition(". ")
        if not (dot and number.isdigit()):
            continue
        if entry.startswith("{"):
            try:
                item = orjson.loads(entry)
            except orjson.JSONDecodeError:
                continue
            if type(item) is dict and item.get("role") == "user":
                return text_of(item.get("content")) or None
            continue
        role, colon, content = entry.partition(": ")
        if colon and (role == "user" or role.startswith("user (")):  # `user (<name>)` for a named message
            return content or None
    return None
