"""An agent that calls its tools natively but replays its history as text, through the real proxy: smolagents'
`ToolCallingAgent` (over `OpenAIServerModel`) writes each call it made into an assistant message ("Calling
tools: [...]") and each result or error into a user message ("Observation: ...", "Error: ... Now let's
retry"), so no request carries a tool result. Searching again in new words for what it already has is
stopped by `novelty` as early as the same loop with its results in the tool fields
(`test_novelty.test_rephrased_searches_returning_the_same_flights_are_stopped`: 4 requests reach the model);
a search finding something new at every step runs to its answer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from smolagents import AgentGenerationError, OpenAIServerModel, Tool, ToolCallingAgent

from tests.e2e import payloads
from tests.e2e.faults import eventually, trips_of
from tests.e2e.test_novelty import QUERIES, flights
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply


class SearchFlights(Tool):  # type: ignore[misc]
    name = "search_flights"
    description = "Search flights."
    inputs = {"query": {"type": "string", "description": "What to search for."}}
    output_type = "string"

    def __init__(self, answer: Callable[[str, int], str]) -> None:
        super().__init__()
        self.answer = answer
        self.calls = 0

    def forward(self, query: str) -> str:
        self.calls += 1
        return self.answer(query, self.calls)


def model_side(queries: list[str]) -> Callable[[Received], Reply]:
    """The model: at step i (its i-th request: a failed step leaves no assistant turn) it searches `queries[i]`; after
    the last one it calls `final_answer`."""
    steps = itertools.count()

    def script(received: Received) -> Reply:
        messages = received.json()["messages"]
        step = next(steps)
        assert not any(m["role"] == "tool" for m in messages)  # the history is text
        call = (
            ("search_flights", {"query": queries[step]})
            if step < len(queries)
            else ("final_answer", {"answer": "FR1882"})
        )
        arguments = json.dumps(call[1])
        return Reply.json(payloads.chat_completion(None, tool_calls=[(f"call_{step}", call[0], arguments)]))

    return script


async def run_agent(proxy_url: str, run_id: str, tool: SearchFlights, max_steps: int = 10) -> Any:
    model = OpenAIServerModel(
        model_id="gpt-4o",
        api_base=proxy_url + "/v1",
        api_key="sk-test-replayed",
        client_kwargs={"default_headers": {"X-Run-Id": run_id}},
    )
    agent = ToolCallingAgent(tools=[tool], model=model, max_steps=max_steps, verbosity_level=0)
    return await asyncio.to_thread(agent.run, "Find a flight from Lisbon to Berlin in May under 30 EUR.")


async def test_rephrased_searches_replayed_as_text_are_stopped_as_early_as_in_the_tool_fields(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = model_side(QUERIES)
    with pytest.raises(AgentGenerationError) as caught:
        await run_agent(proxy_url, "replayed-loop", SearchFlights(flights))
    assert "novelty" in str(caught.value)  # what the person running it reads
    # The 4th answer (the 3rd bringing nothing new) arrives with the 5th request, which is stopped.
    assert len(upstream.received) == 4
    await eventually(lambda: any(t.detector == "novelty" for t in trips_of(sink)))
    trip = next(t for t in trips_of(sink) if t.detector == "novelty")
    assert trip.evidence["tools"] == ["search_flights"] and len(trip.evidence["new_shares"]) == 3


def failing(query: str, call: int) -> str:
    raise RuntimeError("flight search backend unavailable for route LIS-BER (upstream status 503)")


async def test_a_failing_search_retried_in_new_words_is_stopped(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    """Each error comes back as "Call id: ...\\nError:\\nError executing tool 'search_flights' with arguments
    {...}: RuntimeError: ...\\nNow let's retry: ...", naming the new words each time."""
    upstream.script = model_side(QUERIES)
    with pytest.raises(AgentGenerationError) as caught:
        await run_agent(proxy_url, "replayed-errors", SearchFlights(failing))
    assert "novelty" in str(caught.value)
    assert len(upstream.received) == 4


async def test_searches_finding_new_flights_replayed_as_text_run_to_their_answer(
    proxy_url: str, upstream: FakeUpstream, sink: ListSink
) -> None:
    def new_flights(query: str, call: int) -> str:
        rows = [
            {"airline": f"Carrier {call}{n}", "flight": f"X{call}{n:02}", "price_eur": 20 + 9 * call + n, "day": n}
            for n in range(6)
        ]
        return json.dumps({"query": query, "results": rows, "page": call})

    upstream.script = model_side(QUERIES[:6])
    assert await run_agent(proxy_url, "replayed-healthy", SearchFlights(new_flights)) == "FR1882"
    assert len(upstream.received) == 7
    assert not [t for t in trips_of(sink) if t.action == "block"]
