"""Responses API background mode through the real openai SDK: a response's cost counts when a poll finds it done.

`responses.create(background=True)` is answered with a queued Response object
(no output, no usage); the SDK's `responses.retrieve(id)` polls it until it
is finished, and `retrieve(id, stream=True, starting_after=N)` resumes its
stream. The scripted upstream answers the POST queued, then the polls in
progress, then completed with usage and a function call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from runguard.proxy.store.records import RequestRecord
from tests.conftest import ProxyFactory, SdkClient
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of
from tests.e2e.test_azure import azure
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

MODEL = "gpt-4o-mini"  # $0.15 per million input tokens, $0.60 per million output
USAGE = {  # a long reasoning run: little input (well within the context window), much output
    "input_tokens": 50_000,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 700_000,
    "output_tokens_details": {"reasoning_tokens": 600_000},
    "total_tokens": 750_000,
}
USD = 50_000 * 0.15e-6 + 700_000 * 0.6e-6
FINAL = ("completed", "incomplete", "failed", "cancelled")


def _response(response_id: str, status: str, calls: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    done = payloads.response_object("the report", calls)
    if status != "completed":
        return {**done, "id": response_id, "model": MODEL, "status": status, "output": [], "usage": None}
    return {**done, "id": response_id, "model": MODEL, "status": status, "usage": USAGE}


def _stream(response: dict[str, Any], starting_after: int) -> list[bytes]:
    """The events of a finished response's stream after `starting_after` (its function call, then completed)."""
    item = response["output"][0]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "queued", "output": [], "usage": None}},
        {"type": "response.in_progress", "response": {**response, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}},
        {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": item["arguments"]},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response},
    ]
    out = []
    for seq, event in enumerate(events):
        if seq > starting_after:
            event["sequence_number"] = seq
            out.append(f"event: {event['type']}\n".encode() + b"data: " + orjson.dumps(event) + b"\n\n")
    return out


class BackgroundUpstream:
    """Answers a background POST queued, its first poll in progress, every later poll finished.

    `started` maps each POST's input text to the response id it gets; ids in `finished_elsewhere`
    are answered finished at once (responses this proxy never saw start).
    """

    def __init__(self, calls: list[tuple[str, str, str]] | None = None) -> None:
        self.calls = calls or [("call_bg", "search", '{"q": "deep research"}')]
        self.started: dict[str, str] = {}
        self.polls: Counter[str] = Counter()

    def __call__(self, received: Received) -> Reply:
        if received.method == "POST":
            body = received.json()
            if not body.get("background"):  # an ordinary request: answered finished, usage and all
                done = {**payloads.response_object("quick answer"), "id": f"resp_plain{len(self.started)}"}
                self.started[str(body.get("input"))] = done["id"]
                return Reply.json({**done, "model": MODEL})
            response_id = f"resp_bg{len(self.started)}"
            self.started[str(body.get("input"))] = response_id
            return Reply.json(_response(response_id, "queued"))
        response_id = received.path.rsplit("/", 1)[-1]
        self.polls[response_id] += 1
        if response_id.startswith("resp_plain"):
            return Reply.json({**payloads.response_object("quick answer"), "id": response_id, "model": MODEL})
        if self.polls[response_id] == 1 and not response_id.startswith("resp_elsewhere"):
            return Reply.json(_response(response_id, "in_progress"))
        finished = _response(response_id, "completed", self.calls)
        if "stream=true" in received.query:
            after = int(dict(p.split("=") for p in received.query.split("&")).get("starting_after", "-1"))
            return Reply.sse(_stream(finished, after))
        return Reply.json(finished)


@pytest.fixture
def background(upstream: FakeUpstream) -> BackgroundUpstream:
    script = BackgroundUpstream()
    upstream.script = script
    return script


@pytest.fixture
def sdk_for(sdk_client: SdkClient) -> Callable[..., openai.AsyncOpenAI]:
    """sdk_for(url, run_id=None) -> an AsyncOpenAI client on the proxy (closed after the test)."""

    def make(url: str, run_id: str | None = None) -> openai.AsyncOpenAI:
        return sdk_client(url, "sk-bg", {"X-Run-Id": run_id} if run_id else {})

    return make


async def _until_finished(client: openai.AsyncOpenAI, response_id: str) -> Any:
    while True:
        response = await client.responses.retrieve(response_id)
        if response.status in FINAL:
            return response


def _polled(sink: ListSink) -> list[RequestRecord]:
    return [r for r in requests_of(sink) if r.polled]


async def _counters(url: str, run_id: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/runguard/runs/{run_id}") as response:
        assert response.status == 200
        counters: dict[str, Any] = (await response.json())["live"]
        return counters


async def test_a_background_responses_cost_trips_its_runs_budget_once_polled_finished(
    make_proxy: ProxyFactory, background: BackgroundUpstream, sink: ListSink, sdk_for: Callable[..., Any]
) -> None:
    url = await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.4}}})
    client = sdk_for(url, "bg-budget")
    queued = await client.responses.create(model=MODEL, input="deep research", background=True)
    assert queued.status == "queued" and queued.usage is None
    done = await _until_finished(client, queued.id)
    assert done.status == "completed" and done.usage is not None and done.usage.input_tokens == 50_000
    await eventually(lambda: len(_polled(sink)) == 1)
    record = _polled(sink)[0]
    assert (record.run_id, record.index, record.model, record.status) == ("bg-budget", 1, MODEL, 200)
    assert record.usd == pytest.approx(USD) and record.tool_calls == ("search",)
    assert (record.input_tokens, record.output_tokens, record.reasoning_tokens) == (50_000, 700_000, 600_000)
    assert record.finish_reason == "completed" and not record.usage_estimated
    started = [r for r in requests_of(sink) if not r.polled]
    assert [(r.usd, r.input_tokens, r.finish_reason) for r in started] == [(0.0, 0, "queued")]  # nothing estimated
    with pytest.raises(openai.RateLimitError) as stopped:
        await client.responses.create(model=MODEL, input="and now write it up")
    assert stopped.value.response.headers["x-runguard-trip"] == "budget"
    assert "budget" in stopped.value.message


async def test_an_azure_background_response_is_counted_by_its_poll(
    make_proxy: ProxyFactory, background: BackgroundUpstream, sink: ListSink
) -> None:
    """`AsyncAzureOpenAI` polls `/openai/responses/{id}?api-version=...`: its finished answer costs the run."""
    url = await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.4}}})
    client = azure(url, "azure-bg", default_headers={"X-Run-Id": "az"})
    queued = await client.responses.create(model="prod-research", input="deep research", background=True)
    done = await _until_finished(client, queued.id)
    assert done.status == "completed" and background.polls[queued.id] == 2
    await eventually(lambda: len(_polled(sink)) == 1)
    assert _polled(sink)[0].usd == pytest.approx(USD) and _polled(sink)[0].run_id == "az"
    with pytest.raises(openai.RateLimitError) as stopped:
        await client.responses.create(model="prod-research", input="and now write it up")
    assert stopped.value.response.headers["x-runguard-trip"] == "budget"
    await client.close()


async def test_a_finished_response_polled_three_times_counts_once(
    make_proxy: ProxyFactory, background: BackgroundUpstream, sink: ListSink, sdk_for: Callable[..., Any]
) -> None:
    url = await make_proxy(guard={"detectors": {"budget": {"run_usd": USD * 1.5, "key_daily_usd": USD * 1.5}}})
    client = sdk_for(url, "bg-once")
    queued = await client.responses.create(model=MODEL, input="deep research", background=True)
    await _until_finished(client, queued.id)
    for _ in range(2):  # the completed response, polled twice more
        assert (await client.responses.retrieve(queued.id)).status == "completed"
    assert background.polls[queued.id] == 4  # in progress once, then completed three times
    await eventually(lambda: len(_polled(sink)) >= 1)
    counters = await _counters(url, "bg-once")
    assert counters["usd"] == pytest.approx(USD) and counters["input_tokens"] == 50_000
    assert counters["output_tokens"] == 700_000 and counters["requests"] == 1
    # Counted twice, the run (and the key's day) would be past its budget: the next step goes through.
    follow = await client.responses.create(model=MODEL, input="write it up")
    assert follow.status == "completed"
    assert len(_polled(sink)) == 1


async def test_only_a_background_response_started_here_is_counted_by_its_poll(
    make_proxy: ProxyFactory, background: BackgroundUpstream, sink: ListSink, sdk_for: Callable[..., Any]
) -> None:
    url = await make_proxy()
    client = sdk_for(url, "bg-mixed")
    plain = await client.responses.create(model=MODEL, input="quick question")  # counted when answered
    queued = await client.responses.create(model=MODEL, input="deep research", background=True)
    elsewhere = await client.responses.retrieve("resp_elsewhere1")  # never seen through this proxy
    assert elsewhere.status == "completed" and elsewhere.usage is not None
    assert (await client.responses.retrieve(plain.id)).status == "completed"  # an ordinary response, polled
    await _until_finished(client, queued.id)
    await eventually(lambda: len(_polled(sink)) == 1)
    assert [r.index for r in _polled(sink)] == [2]
    counters = await _counters(url, "bg-mixed")
    assert counters["input_tokens"] == 20 + 50_000  # the plain answer's usage, and the background one's
    assert len(requests_of(sink)) == 3  # the two POSTs and the background response's poll; no other poll


async def test_a_resumed_background_stream_is_counted_once(
    make_proxy: ProxyFactory, background: BackgroundUpstream, sink: ListSink, sdk_for: Callable[..., Any]
) -> None:
    url = await make_proxy()
    client = sdk_for(url, "bg-stream")
    queued = await client.responses.create(model=MODEL, input="deep research", background=True)
    assert (await client.responses.retrieve(queued.id)).status == "in_progress"
    for _ in range(2):  # resumed twice: both streams end with response.completed
        stream = await client.responses.retrieve(queued.id, stream=True, starting_after=1)
        events = [event async for event in stream]
        assert [e.type for e in events][-1] == "response.completed" and events[0].sequence_number == 2
        assert events[-1].response.usage is not None
    await eventually(lambda: len(_polled(sink)) == 1)
    record = _polled(sink)[0]
    assert record.streamed and record.tool_calls == ("search",) and record.usd == pytest.approx(USD)
    counters = await _counters(url, "bg-stream")
    assert counters["usd"] == pytest.approx(USD) and counters["input_tokens"] == 50_000


async def test_a_follow_up_of_a_polled_response_gets_its_tool_results_named(
    make_proxy: ProxyFactory, upstream: FakeUpstream, sink: ListSink, sdk_for: Callable[..., Any]
) -> None:
    """The background response hands over to another agent; the follow-up carries only the handoff's
    result, which names the agent speaking next once the result is known to answer `transfer_to_billing`."""
    upstream.script = BackgroundUpstream([("call_t", "transfer_to_billing", "{}")])
    url = await make_proxy()
    client = sdk_for(url, "bg-follow")
    queued = await client.responses.create(
        model=MODEL, input="refund my order", instructions="You triage.", background=True
    )
    await _until_finished(client, queued.id)
    await client.responses.create(
        model=MODEL,
        instructions="You handle billing.",
        previous_response_id=queued.id,
        input=[{"type": "function_call_output", "call_id": "call_t", "output": '{"assistant": "Billing"}'}],
    )
    await eventually(lambda: len(requests_of(sink)) == 3)
    follow = requests_of(sink)[-1]
    assert (follow.index, follow.polled) == (2, False)
    assert follow.agent == "billing"
    polled = _polled(sink)[0]
    assert polled.handoff_to == "billing" and polled.tool_calls == ("transfer_to_billing",)
