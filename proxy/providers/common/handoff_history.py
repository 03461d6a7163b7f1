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
root is the transcript's first user turn, as it was before the handoff; and the
handoff's acknowledgement, which would otherwise come back as the transfer's
result and name the agent taken over (`agent_names`), is read from the transcript.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from runguard.proxy.core.events import is_transfer
from runguard.proxy.providers.common.handoffs import acknowledged_name
from runguard.proxy.providers.common.jsonish import text_of

# The opening line, and the one releases before 0.19 wrote.
PREAMBLES = (
    "For context, here is the conversation so far between the user and the previous agent:\n",
    "For context, here is the conversation so far:\n",
)


class Transcript(NamedTuple):
    """What the transcript a conversation opens with says."""

    root: str | None  # its first user turn: the conversation's root
    handed_to: str | None  # the agent its last handoff named (`{"assistant": "<name>"}`), as the SDK wrote it


def carried(items: list[Any]) -> Transcript | None:
    """The transcript a leading nested-history message carries, if the conversation opens with one (after
    its system messages)."""
    for item in items:
        role = item.get("role") if type(item) is dict else None
        if role in ("system", "developer"):
            continue
        if role != "assistant":
            return None  # the usual conversation: its own first user message is its root
        content = item.get("content")
        text = content if type(content) is str else text_of(content)
        return _read(text) if text.startswith(PREAMBLES) else None
    return None


def _read(transcript: str) -> Transcript:
    root: str | None = None
    transfers: set[str] = set()  # call ids of the transcript's `transfer_to_*` calls
    handed_to: str | None = None
    for line in transcript.split("\n")[2:]:  # after the opening line and the start marker
        number, dot, entry = line.partition(". ")
        if not (dot and number.isdigit()):
            continue
        if not entry.startswith("{"):
            role, colon, content = entry.partition(": ")
            if root is None and colon and (role == "user" or role.startswith("user (")):  # `user (<name>)`
                root = content or None
            continue
        try:
            item = orjson.loads(entry)
        except orjson.JSONDecodeError:
            continue
        if type(item) is not dict:
            continue
        if item.get("role") == "user":
            root = root or text_of(item.get("content")) or None
        elif item.get("type") == "function_call" and isinstance(name := item.get("name"), str) and is_transfer(name):
            transfers.add(str(item.get("call_id")))
        elif item.get("type") == "function_call_output" and str(item.get("call_id")) in transfers:
            output = item.get("output")
            handed_to = (acknowledged_name(output) if isinstance(output, str) else None) or handed_to
    return Transcript(root, handed_to)
