"""openai-agents' nested handoff history (`RunConfig(nest_handoff_history=True)`): the agent taken over gets the
conversation so far as one transcript message, and stays in the run of the conversation it continues."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled

from tests.conftest import SdkClient
from tests.e2e import payloads
from tests.e2e.agents import sdk_model
from tests.e2e.faults import requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

set_tracing_disabled(True)

CUSTOMERS = ("I want a refund for order 42.", "Where is the refund for order 7?", "Cancel order 19 and refund me.")


def desk(kind: str, refunds: str) -> Callable[[Received], Reply]:
    """Triage hands every customer to billing; billing looks the refund up (getting `refunds` back each time)
    until it has an answer it can give, or forever when the refund service keeps failing."""
    ids = itertools.count()

    def script(received: Received) -> Reply:
        body = received.json()
        items = body["input"] if kind == "responses" else body["messages"]
        instructions = body["instructions"] if kind == "responses" else items[0]["content"]
        looked = sum(1 for i in items if i.get("type") == "function_call_output" or i.get("role") == "tool")
        if instructions.startswith("You are triage"):
            call = (f"call_{next(ids)}", "transfer_to_billing", "{}")
        elif looked and "unavailable" not in refunds:
            return reply(kind, "Your refund is on its way.")
        else:
            call = (f"call_{next(ids)}", "refund_status", json.dumps({"order": "latest"}))
        return reply(kind, call=call)

    return script


def reply(kind: str, text: str = "", call: tuple[str, str, str] | None = None) -> Reply:
    calls = [call] if call else None
    if kind == "responses":
        return Reply.json(payloads.response_object(text, calls=calls))
    return Reply.json(payloads.chat_completion(text, tool_calls=calls))


async def serve(kind: str, client: openai.AsyncOpenAI, refunds: str, *customers: str) -> list[str]:
    model = sdk_model(kind, client)

    @function_tool
    def refund_status(order: str) -> str:
        """The state of a refund."""
        return refunds

    billing = Agent(name="Billing", instructions="You are billing.", model=model, tools=[refund_status])
    triage = Agent(name="Triage", instructions="You are triage.", model=model, handoffs=[billing])
    nested = RunConfig(nest_handoff_history=True)
    results = [await Runner.run(triage, customer, run_config=nested) for customer in customers]
    return [str(result.final_output) for result in results]


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_each_customer_s_conversation_is_one_run_after_its_handoff(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient, kind: str
) -> None:
    """Billing's requests carry no user message of their own: they join the run of the conversation they
    continue, not one run that every customer's billing requests shared."""
    upstream.script = desk(kind, json.dumps({"refund": "sent"}))
    answers = await serve(
        kind, sdk_client(await make_proxy(), "sk-test-nested"), json.dumps({"refund": "sent"}), *CUSTOMERS
    )
    assert answers == ["Your refund is on its way."] * 3
    assert "CONVERSATION HISTORY" in json.dumps(upstream.received[-1].json())  # the SDK sent the transcript
    records = requests_of(sink)
    runs = [r.run_id for r in records]
    assert len(records) == 9 and len(set(runs)) == 3
    assert runs == [runs[0]] * 3 + [runs[3]] * 3 + [runs[6]] * 3
    # The agent taken over is named by the handoff the transcript acknowledges, as without the nesting.
    assert [r.agent for r in records[:3]] == [records[0].agent, "billing", "billing"]
    assert not trips_of(sink)


async def test_a_billing_agent_looping_after_the_handoff_is_stopped_in_its_customer_s_run(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient
) -> None:
    failing = json.dumps({"status": "error", "message": "refund service unavailable"})
    upstream.script = desk("responses", failing)
    with pytest.raises(openai.RateLimitError, match="non_progress"):
        await serve("responses", sdk_client(await make_proxy(), "sk-test-nested"), failing, CUSTOMERS[0])
    records = requests_of(sink)
    assert len({r.run_id for r in records}) == 1
    assert [r.blocked_by for r in records] == [None, None, None, None, "non_progress"]
