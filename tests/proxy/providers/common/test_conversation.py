"""What a request's conversation says about its last step: here, the user text that came after the last turn."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import Api, RequestInfo, digest
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.conversation import Conversation, identify
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter

QUOTED = "For context: [{agent}] said:\n<<<BEGIN_QUOTED_AGENT_CONTENT>>>\n{text}\n<<<END_QUOTED_AGENT_CONTENT>>>"


def chat(*messages: dict[str, Any]) -> RequestInfo:
    return ChatAdapter().parse_request(orjson.dumps({"model": "m", "messages": messages}), RequestContext())


def gemini(*contents: dict[str, Any]) -> RequestInfo:
    body = {"contents": contents}
    return GeminiAdapter().parse_request(orjson.dumps(body), RequestContext(path_model="gemini-2.5-flash"))


def asked(first: str, then: str) -> RequestInfo:
    """`first` answered, then `then` asked."""
    return chat(
        {"role": "user", "content": first}, {"role": "assistant", "content": "A"}, {"role": "user", "content": then}
    )


def test_only_the_user_text_after_the_last_assistant_turn_is_hashed() -> None:
    assert asked("Q1", "Q2").new_user_hash is not None
    assert asked("Q1", "Q2").new_user_hash == asked("Q0", "Q2").new_user_hash  # the earlier question is history
    assert asked("Q1", "Q2").new_user_hash != asked("Q1", "Q3").new_user_hash
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    results_only = chat(
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    )
    assert results_only.new_user_hash is None


def test_adk_quoting_another_agents_turn_is_user_text_of_the_step() -> None:
    def after_transfer(quoted: str) -> RequestInfo:
        transfer = {"functionCall": {"name": "transfer_to_agent", "args": {"agent_name": "editor"}}}
        return gemini(
            {"role": "user", "parts": [{"text": "Write a poem."}]},
            {"role": "model", "parts": [{"text": "Draft v0"}, transfer]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "transfer_to_agent", "response": {"result": None}}}],
            },
            {"role": "user", "parts": [{"text": QUOTED.format(agent="editor", text=quoted)}]},
        )

    assert after_transfer("Tighten stanza 1").new_user_hash == after_transfer("Tighten stanza 1").new_user_hash
    assert after_transfer("Tighten stanza 1").new_user_hash != after_transfer("Tighten stanza 2").new_user_hash


def test_the_question_is_the_last_message_the_user_asked_since_the_last_turn() -> None:
    assert asked("Q1", "Q2").question_hash == asked("Q0", "Q2").question_hash != asked("Q1", "Q3").question_hash
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    results_only = chat(
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    )
    assert results_only.question_hash is None  # the same question goes on


def test_adk_s_quotes_of_other_agents_are_no_question_of_the_user_s() -> None:
    """A specialist's first request after a transfer: the user's question, then ADK's quotes of the
    coordinator's turns. Its question is the user's, as in the coordinator's own request."""
    quote = {"role": "user", "parts": [{"text": QUOTED.format(agent="coordinator", text="transfer_to_agent")}]}
    asked_first = gemini({"role": "user", "parts": [{"text": "Q2 billing: my invoice"}]})
    specialist = gemini(
        {"role": "user", "parts": [{"text": "Q1 support: my login"}]},
        quote,
        {"role": "user", "parts": [{"text": "Q2 billing: my invoice"}]},
        quote,
    )
    assert specialist.question_hash is not None
    assert specialist.question_hash == asked_first.question_hash
    only_quotes = gemini(
        {"role": "user", "parts": [{"text": "Write a poem."}]},
        {"role": "model", "parts": [{"text": "Draft v0"}]},
        quote,
    )
    assert only_quotes.question_hash is None and only_quotes.new_user_hash is not None


def test_the_task_an_agno_member_gets_after_the_team_s_context_is_hashed_as_the_task() -> None:
    task = "Summarise the Q3 invoices for the board"
    interactions = "<member_interaction_context>\nMember: a\nTask: b\nResponse: c\n</member_interaction_context>\n"
    history = "<team_history_context>\n[run-1]\ninput: hi\nresponse: hello\n\n</team_history_context>\n"
    for context in (interactions, history, interactions + "\n\n" + history):
        info = chat({"role": "user", "content": context + "\n\n" + task})
        assert info.task_hash == digest(task) and info.root_hash != digest(task)
    assert chat({"role": "user", "content": task}).task_hash is None
    assert chat({"role": "user", "content": interactions}).task_hash is None  # no task after it


def test_the_end_user_an_openai_request_names_is_hashed_safety_identifier_first() -> None:
    def end_user(adapter: ChatAdapter | ResponsesAdapter, array: str, **fields: Any) -> str | None:
        body = {"model": "m", array: [{"role": "user", "content": "hi"}], **fields}
        return adapter.parse_request(orjson.dumps(body), RequestContext()).end_user

    for adapter, array in ((ChatAdapter(), "messages"), (ResponsesAdapter(), "input")):
        alice = end_user(adapter, array, user="alice")
        assert alice is not None and "alice" not in alice  # a digest, never the id itself
        assert end_user(adapter, array, safety_identifier="alice") == alice
        assert end_user(adapter, array, safety_identifier="bob", user="alice") not in (alice, None)
        assert end_user(adapter, array) is None
        assert end_user(adapter, array, user="") is None and end_user(adapter, array, user=["alice"]) is None


def test_an_agent_whose_instructions_carry_the_time_keeps_its_fingerprint() -> None:
    def agent(instructions: str, *tools: str) -> str:
        return identify(instructions, tools, None).fingerprint

    monday = agent("You triage tickets.\nThe current time is 2026-11-23 09:14:03.512907.", "list_tickets")
    assert agent("You triage tickets.\nThe current time is 2026-11-26 17:40:59.000001.", "list_tickets") == monday
    assert agent("You triage tickets.\nThe current time is 2026-11-26 17:40:59.", "close_ticket") != monday
    assert agent("You triage invoices.\nThe current time is 2026-11-23 09:14:03.512907.", "list_tickets") != monday


def test_a_selector_whose_one_system_message_holds_a_growing_transcript_stays_one_agent() -> None:
    """AutoGen's speaker selector: the roles and the transcript so far in one system message, nothing else."""

    def pick(turns: int) -> RequestInfo:
        transcript = "\n".join(f"{'writer' if i % 2 else 'critic'}: message {i}" for i in range(turns))
        prompt = f"You are in a role play game. Roles: writer, critic.\nConversation:\n{transcript}\nPick the next."
        return chat({"role": "system", "content": prompt})

    assert len({pick(turns).agent.fingerprint for turns in range(1, 8)}) == 1
    other = chat({"role": "system", "content": "You route tickets to a team.\nTicket: printer on fire"})
    assert other.agent.fingerprint != pick(1).agent.fingerprint
    # With a user message it is a conversation: its agent is named by its whole instructions, as before.
    writer = chat({"role": "system", "content": "You write.\nStyle A"}, {"role": "user", "content": "Go"})
    assert (
        writer.agent.fingerprint
        != chat(
            {"role": "system", "content": "You write.\nStyle B"}, {"role": "user", "content": "Go"}
        ).agent.fingerprint
    )


def test_the_tail_user_texts_are_kept_as_sent() -> None:
    request = asked("Q1", "Observation: 3 results")
    assert request.new_user_texts == ("Observation: 3 results",)
    assert chat({"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A"}).new_user_texts == ()


def test_the_agent_header_is_given_as_itself_or_as_the_request_context() -> None:
    talk = Conversation()
    talk.user("hi")
    by_name = talk.info(api=Api.CHAT, model="m", stream=False, agent_header="planner", tool_names=())
    by_ctx = talk.info(api=Api.CHAT, model="m", stream=False, ctx=RequestContext(agent_header="planner"), tool_names=())
    unnamed = talk.info(api=Api.CHAT, model="m", stream=False, tool_names=())
    assert by_name.agent == by_ctx.agent and by_name.agent.name == "planner"
    assert unnamed.agent.name is None
