"""The root of a conversation that openai-agents hands over as a transcript (nested handoff history)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from runguard.proxy.core.events import digest
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.handoff_history import Transcript, carried
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter

PREAMBLE = "For context, here is the conversation so far between the user and the previous agent:"


def transcript(
    *lines: str,
    preamble: str = PREAMBLE,
    markers: tuple[str, str] = ("<CONVERSATION HISTORY>", "</CONVERSATION HISTORY>"),
) -> dict[str, Any]:
    numbered = [f"{n}. {line}" for n, line in enumerate(lines, 1)]
    return {"role": "assistant", "content": "\n".join([preamble, markers[0], *numbered, markers[1]])}


CALL = json.dumps({"arguments": "{}", "call_id": "call_h", "name": "transfer_to_billing", "type": "function_call"})


@pytest.mark.parametrize(
    ("items", "root"),
    [
        pytest.param(
            [transcript("user: I want a refund for order 42.", CALL)], "I want a refund for order 42.", id="one-line"
        ),
        pytest.param(
            [transcript(json.dumps({"role": "user", "content": "Refund:\n1. order 42\n2. order 7"}), CALL)],
            "Refund:\n1. order 42\n2. order 7",
            id="multi-line-as-json",
        ),
        pytest.param(
            [transcript(json.dumps({"role": "user", "content": [{"type": "input_text", "text": "Refund 42"}]}))],
            "Refund 42",
            id="content-parts",
        ),
        pytest.param([transcript("user (Ana): Refund 42, please: today.")], "Refund 42, please: today.", id="named"),
        pytest.param([transcript("assistant: Hello!", "user: Refund 42")], "Refund 42", id="user-second"),
        pytest.param(
            [transcript("user: Refund 42", preamble="For context, here is the conversation so far:")],
            "Refund 42",
            id="older-preamble",
        ),
        pytest.param(
            [transcript("user: Refund 42", markers=("<HISTORY>", "</HISTORY>"))], "Refund 42", id="own-markers"
        ),
        pytest.param(
            [
                {"role": "system", "content": "You are billing."},
                transcript("user: Refund 42"),
                {"role": "user", "content": "More"},
            ],
            "Refund 42",
            id="chat-after-instructions",
        ),
    ],
)
def test_the_transcript_s_first_user_turn_is_the_root(items: list[Any], root: str) -> None:
    found = carried(items)
    assert found is not None and found.root == root


@pytest.mark.parametrize(
    "items",
    [
        pytest.param([{"role": "user", "content": "Refund 42"}, transcript("user: other")], id="a-user-message-first"),
        pytest.param([{"role": "assistant", "content": "Welcome! How can I help?"}], id="a-greeting-first"),
        pytest.param([transcript(CALL, "assistant: done")], id="no-user-turn"),
        pytest.param([transcript("user: ")], id="an-empty-turn"),
        pytest.param([transcript("{not json", "user")], id="unreadable-lines"),
        pytest.param(["text", transcript("user: Refund 42")], id="not-an-object-first"),
        pytest.param([], id="empty"),
    ],
)
def test_other_conversations_carry_no_root(items: list[Any]) -> None:
    found = carried(items)
    assert found is None or found.root is None


def test_the_agent_taken_over_has_the_root_of_the_conversation_it_continues() -> None:
    context = RequestContext()
    first = {"model": "gpt-4o", "instructions": "You are triage.", "input": [{"role": "user", "content": "Refund 42"}]}
    handed = {"model": "gpt-4o", "instructions": "You are billing.", "input": [transcript("user: Refund 42", CALL)]}
    chat = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "You are billing."}, transcript("user: Refund 42")],
    }
    roots = {
        ResponsesAdapter().parse_request(orjson.dumps(first), context).root_hash,
        ResponsesAdapter().parse_request(orjson.dumps(handed), context).root_hash,
        ChatAdapter().parse_request(orjson.dumps(chat), context).root_hash,
    }
    assert roots == {digest("Refund 42")}


def output(call_id: str, text: str) -> str:
    return json.dumps({"call_id": call_id, "output": text, "type": "function_call_output"})


def test_the_last_handoff_the_transcript_acknowledges_names_the_agent_taken_over() -> None:
    back = json.dumps({"arguments": "{}", "call_id": "call_b", "name": "transfer_to_triage", "type": "function_call"})
    lookup = json.dumps({"arguments": "{}", "call_id": "call_l", "name": "lookup", "type": "function_call"})
    lines = ("user: Refund 42", CALL, output("call_h", '{"assistant": "Billing Agent"}'), back)
    assert carried([transcript(*lines, output("call_b", '{"assistant": "Triage"}'))]) == Transcript(
        "Refund 42", "Triage"
    )
    assert carried([transcript(*lines)]) == Transcript("Refund 42", "Billing Agent")
    # A tool that answers like an acknowledgement is no handoff.
    assert carried([transcript("user: Refund 42", lookup, output("call_l", '{"assistant": "Nobody"}'))]) == Transcript(
        "Refund 42", None
    )
