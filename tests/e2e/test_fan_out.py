"""Fan-outs through the real proxy with openai-agents' agents as tools: one wide fan-out runs to its end;
the same fan-out sent again, reworded, round after round, is stopped before its third round runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from agents import Agent, Runner, set_tracing_disabled

from tests.conftest import SdkClient
from tests.e2e import payloads
from tests.e2e.agents import sdk_model
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

set_tracing_disabled(True)

DESKS = ("flights", "hotels", "trains", "visas", "weather", "events")
REWORDED = [
    "find the cheapest options from Lisbon to Berlin in May and report prices",
    "search again for the cheapest Lisbon to Berlin options in May and list prices",
    "look once more for the cheapest May options Lisbon to Berlin and report the prices",
    "try again: cheapest Lisbon to Berlin options in May, report prices",
    "one more time find the cheapest options Lisbon Berlin May with prices",
]


def coordinator(kind: str, desks: tuple[str, ...], rounds: list[str]) -> Callable[[Received], Reply]:
    """The coordinator sends every desk agent `rounds[r]` at once in round r, then reports; each desk agent
    answers its task."""

    def script(received: Received) -> Reply:
        body = received.json()
        items = body["input"] if kind == "responses" else body["messages"]
        instructions = body["instructions"] if kind == "responses" else items[0]["content"]
        if instructions.startswith("You are the"):
            desk = instructions.split()[3]
            text = f"{desk}: three options found, from 41 to 132 EUR"
            return Reply.json(payloads.response_object(text) if kind == "responses" else payloads.chat_completion(text))
        done = sum(1 for i in items if i.get("type") == "function_call_output" or i.get("role") == "tool")
        round_ = done // len(desks)
        if round_ >= len(rounds):
            text = "Trip planned."
            return Reply.json(payloads.response_object(text) if kind == "responses" else payloads.chat_completion(text))
        calls = [
            (f"call_{round_}_{desk}", f"ask_{desk}", json.dumps({"input": f"{desk}: {rounds[round_]}"}))
            for desk in desks
        ]
        if kind == "responses":
            return Reply.json(payloads.response_object(calls=calls))
        return Reply.json(payloads.chat_completion(tool_calls=calls))

    return script


def planner(client: openai.AsyncOpenAI, kind: str, desks: tuple[str, ...]) -> Agent[Any]:
    model = sdk_model(kind, client)
    tools = [
        Agent(name=f"{desk}_agent", instructions=f"You are the {desk} desk agent.", model=model).as_tool(
            tool_name=f"ask_{desk}", tool_description=f"Ask the {desk} desk."
        )
        for desk in desks
    ]
    return Agent(name="coordinator", instructions="You coordinate the travel desks.", model=model, tools=tools)


@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_one_six_wide_fan_out_runs_to_its_end(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient, kind: str
) -> None:
    """Six desk agents asked at once (`parallel_calls` stopped this at its first response while its cap was 5)."""
    upstream.script = coordinator(kind, DESKS, REWORDED[:1])
    client = sdk_client(await make_proxy(), "sk-test-fan", {"X-Run-Id": f"wide-{kind}"})
    result = await Runner.run(planner(client, kind, DESKS), "Plan a trip from Lisbon to Berlin in May.")
    assert result.final_output == "Trip planned."
    assert len(requests_of(sink)) == 1 + len(DESKS) + 1
    assert not trips_of(sink)


@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_a_five_wide_fan_out_sent_again_reworded_is_stopped_before_its_third_round(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient, kind: str
) -> None:
    desks = DESKS[:5]
    upstream.script = coordinator(kind, desks, REWORDED)
    client = sdk_client(await make_proxy(), "sk-test-fan", {"X-Run-Id": f"again-{kind}"})
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(planner(client, kind, desks), "Plan a trip from Lisbon to Berlin in May.")
    assert caught.value.code == "runguard_fan_out"
    # Two rounds ran (the coordinator's two responses and its five desks each); the third round's response was
    # replaced before any desk ran again.
    assert len(upstream.received) == 3 + 2 * len(desks)
    await eventually(lambda: any(t.detector == "fan_out" for t in trips_of(sink)))
    trip = next(t for t in trips_of(sink) if t.detector == "fan_out")
    assert trip.evidence["tools"] == [f"ask_{desk}" for desk in sorted(desks)] and trip.evidence["turns"] == 3


async def test_rounds_of_new_tasks_for_the_same_desks_run_to_their_end(
    upstream: FakeUpstream, make_proxy: Callable[..., Any], sink: ListSink, sdk_client: SdkClient
) -> None:
    rounds = [
        "list the options from Lisbon to Berlin in May",
        "book the option the traveller picked: reference TP552",
        "send the confirmation to the traveller's calendar and email",
        "check for changes to the booking a week before departure",
    ]
    desks = DESKS[:5]
    upstream.script = coordinator("chat", desks, rounds)
    client = sdk_client(await make_proxy(), "sk-test-fan", {"X-Run-Id": "rounds"})
    result = await Runner.run(planner(client, "chat", desks), "Plan and book a trip.")
    assert result.final_output == "Trip planned."
    assert not trips_of(sink)
