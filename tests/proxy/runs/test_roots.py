"""Runs without `X-Run-Id`: which run a conversation root belongs to, and when it starts a new one.

The real proxy on loopback with the openai SDK as its client: a scheduled agent
(the same prompt under one key, invoked again and again) gets a run per
invocation once its last run has been idle for `runs.inferred_idle_seconds`,
while a conversation that goes on after a pause, a retry and concurrent first
requests stay in one run.
"""

from __future__ import annotations

import asyncio
import base64
import random
from typing import Any

import openai
import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from google import genai
from google.genai import types

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.ops import Scope
from runguard.proxy.runs import roots, tenants
from runguard.proxy.state.memory import MemoryState
from tests.conftest import ProxyFactory, SdkClient
from tests.e2e import payloads
from tests.e2e.agents import sdk_model
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

IDLE = 0.3  # runs.inferred_idle_seconds in these tests
PROMPT: list[Any] = [
    {"role": "system", "content": "You triage the support inbox."},
    {"role": "user", "content": "Triage the new tickets in the inbox"},
]
CALL = ("call_inbox", "list_tickets", '{"status": "new"}')
LIMITED: dict[str, Any] = {
    "runs": {"inferred_idle_seconds": IDLE},
    "guard": {"detectors": {"max_requests": {"limit": 3}}},
}

set_tracing_disabled(True)


def agent_step(received: Received) -> Reply:
    """The model: lists the tickets when asked, answers once it has them."""
    if received.json()["messages"][-1]["role"] == "user":
        return Reply.json(payloads.chat_completion(tool_calls=[CALL]))
    return Reply.json(payloads.chat_completion("Two tickets, both billing: routed."))


async def invoke(client: openai.AsyncOpenAI, **fields: Any) -> list[Any]:
    """One invocation of the scheduled agent: a tool call and its answer, with these `fields` in both
    requests' bodies. Returns the conversation."""
    first = await client.chat.completions.create(model="gpt-4o-mini", messages=PROMPT, **fields)
    call = first.choices[0].message
    assert call.tool_calls
    messages = [*PROMPT, call.model_dump(exclude_none=True)]
    messages.append({"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": "2 new tickets"})
    last = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, **fields)
    return [*messages, last.choices[0].message.model_dump(exclude_none=True)]


@pytest.fixture
async def client(make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream) -> openai.AsyncOpenAI:
    upstream.script = agent_step
    url = await make_proxy(runs={"inferred_idle_seconds": IDLE}, guard={"detectors": {"max_requests": {"limit": 3}}})
    return sdk_client(url, "sk-scheduled")


def test_an_owner_entry_reads_back_as_written() -> None:
    for owner in (roots.Owner("r-0123", since=1700000000.25), roots.Owner("team 42\x00x", nested=True)):
        assert roots.loads(roots.dumps(owner)) == owner
    assert roots.loads("r-legacy-plain-run-id") is None
    assert roots.loads("rnot-a-time\x00r-1") is None


async def test_each_invocation_of_a_scheduled_agent_is_a_run_of_its_own(
    client: openai.AsyncOpenAI, sink: ListSink
) -> None:
    """Merged, the three invocations' six requests would pass the step limit of 3 and be stopped."""
    for _ in range(3):
        await invoke(client)
        await asyncio.sleep(IDLE * 2)
    await eventually(lambda: len(requests_of(sink)) == 6)
    runs = [r.run_id for r in requests_of(sink)]
    assert runs[0] == runs[1] and runs[2] == runs[3] and runs[4] == runs[5]
    assert len(set(runs)) == 3
    assert [r.index for r in requests_of(sink)] == [1, 2] * 3
    assert trips_of(sink) == []


async def test_the_same_prompt_within_the_idle_time_stays_in_the_run(
    client: openai.AsyncOpenAI, sink: ListSink
) -> None:
    await invoke(client)
    with pytest.raises(openai.RateLimitError) as caught:
        await invoke(client)  # no pause: the same run, whose 4th request passes the limit of 3
    assert caught.value.code == "runguard_max_requests"
    assert len({r.run_id for r in requests_of(sink)}) == 1


@pytest.mark.parametrize("field", ["safety_identifier", "user"])
async def test_end_users_whose_conversations_open_alike_are_runs_of_their_own(
    client: openai.AsyncOpenAI, sink: ListSink, upstream: FakeUpstream, field: str
) -> None:
    """A chatbot under one key, with no pause between its users: merged, their four requests would pass
    the step limit of 3. Each names its end user, as OpenAI asks apps to."""
    await asyncio.gather(invoke(client, **{field: "user-4711"}), invoke(client, **{field: "user-0815"}))
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert trips_of(sink) == []
    assert len({r.run_id for r in requests_of(sink)}) == 2
    assert sorted(r.index for r in requests_of(sink)) == [1, 1, 2, 2]
    assert {received.json()[field] for received in upstream.received} == {"user-4711", "user-0815"}


async def test_one_end_user_s_agent_started_again_at_once_stays_in_its_run(
    client: openai.AsyncOpenAI, sink: ListSink
) -> None:
    await invoke(client, safety_identifier="user-4711")
    with pytest.raises(openai.RateLimitError) as caught:
        await invoke(client, safety_identifier="user-4711")
    assert caught.value.code == "runguard_max_requests"


async def test_a_conversation_that_goes_on_after_a_pause_stays_in_its_run(
    client: openai.AsyncOpenAI, sink: ListSink
) -> None:
    """A user coming back to a chat: its history has assistant turns, so it is no new invocation."""
    conversation = await invoke(client)
    await asyncio.sleep(IDLE * 2)
    more = [*conversation, {"role": "user", "content": "Escalate the second one"}]
    await client.chat.completions.create(model="gpt-4o-mini", messages=more)
    await eventually(lambda: len(requests_of(sink)) == 3)
    assert len({r.run_id for r in requests_of(sink)}) == 1
    assert requests_of(sink)[-1].index == 3


async def test_a_first_request_sent_again_while_the_first_is_in_flight_stays_in_its_run(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream, sink: ListSink
) -> None:
    """Idle for longer than the idle time, but with a request under way: the run is not over."""

    def second_is_slow(received: Received) -> Reply:
        reply = Reply.json(payloads.chat_completion("done"))
        reply.delay = IDLE * 4 if len(upstream.received) == 2 else 0.0
        return reply

    upstream.script = second_is_slow
    client = sdk_client(await make_proxy(runs={"inferred_idle_seconds": IDLE}), "sk-slow")
    await client.chat.completions.create(model="gpt-4o-mini", messages=PROMPT)
    await asyncio.sleep(IDLE * 2)
    slow = asyncio.ensure_future(client.chat.completions.create(model="gpt-4o-mini", messages=PROMPT))
    await eventually(lambda: len(upstream.received) == 2)
    await asyncio.sleep(IDLE * 1.5)  # the run has been idle for longer than the idle time again
    await client.chat.completions.create(model="gpt-4o-mini", messages=PROMPT)
    await slow
    await eventually(lambda: len(requests_of(sink)) == 3)
    first, third, second = requests_of(sink)  # in the order they finished
    assert second.run_id != first.run_id  # after the idle time, with nothing in flight: a new run
    assert third.run_id == second.run_id  # while the second was in flight: the same run
    assert (second.index, third.index) == (1, 2)


async def test_concurrent_first_requests_of_a_new_root_agree_on_one_run(
    client: openai.AsyncOpenAI, sink: ListSink
) -> None:
    await asyncio.gather(*(client.chat.completions.create(model="gpt-4o-mini", messages=PROMPT) for _ in range(3)))
    await eventually(lambda: len(requests_of(sink)) == 3)
    assert len({r.run_id for r in requests_of(sink)}) == 1


async def test_a_run_that_outlives_its_root_entry_s_first_ttl_keeps_its_id(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """The root's entry is written again while its run goes on: without that it would expire after
    twice the run's idle time, and the run's next request would start a run with a new id."""
    upstream.script = agent_step
    state = MemoryState()
    settings = settings_for(upstream.url, runs={"idle_seconds": 0.4, "inferred_idle_seconds": 0.2})
    running = await start_proxy(settings, sink=sink, state=state)
    client = openai.AsyncOpenAI(base_url=running.url + "/v1", api_key="sk-long", max_retries=0)
    try:
        conversation = await invoke(client)
        for turn in range(8):  # 1.2 s of steps 0.15 s apart: three times the entry's first TTL of 0.8 s
            await asyncio.sleep(0.15)
            conversation.append({"role": "user", "content": f"And the next one, number {turn}"})
            answer = await client.chat.completions.create(model="gpt-4o-mini", messages=conversation)
            conversation.append(answer.choices[0].message.model_dump(exclude_none=True))
        await eventually(lambda: len(requests_of(sink)) == 10)
        runs = {r.run_id for r in requests_of(sink)}
        assert len(runs) == 1
        (run,) = runs
        own = tenants.state_id(requests_of(sink)[0].key_hash, run)  # the key's run (`tenants`)
        assert (await state.read_scope(Scope.RUN, own)).get("core.requests") == 10
    finally:
        await client.close()
        await running.stop()


@function_tool
def list_tickets(status: str) -> str:
    """The inbox's tickets with this status."""
    return "2 new tickets"


def responses_step(received: Received) -> Reply:
    if received.json()["input"][-1].get("type") != "function_call_output":
        return Reply.json(payloads.response_object(calls=[CALL]))
    return Reply.json(payloads.response_object("Two tickets, both billing: routed."))


async def test_an_openai_agents_job_run_again_later_is_a_run_of_its_own(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = responses_step
    client = sdk_client(await make_proxy(**LIMITED), "sk-agents-job")
    agent = Agent(name="triage", instructions="You triage the inbox.", tools=[list_tickets])
    agent.model = sdk_model("responses", client)
    for _ in range(3):
        result = await Runner.run(agent, "Triage the new tickets in the inbox")
        assert result.final_output == "Two tickets, both billing: routed."
        await asyncio.sleep(IDLE * 2)
    await eventually(lambda: len(requests_of(sink)) == 6)
    assert [r.index for r in requests_of(sink)] == [1, 2] * 3
    assert len({r.run_id for r in requests_of(sink)}) == 3


async def test_a_google_genai_prompt_sent_again_later_is_a_run_of_its_own(
    make_proxy: ProxyFactory, upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply.json(payloads.gemini_response("Nothing new in the inbox."))
    url = await make_proxy(**LIMITED)
    client = genai.Client(api_key="gemini-scheduled", http_options=types.HttpOptions(base_url=url))
    for pause in (0.0, IDLE * 2, 0.0, IDLE * 2):
        await asyncio.sleep(pause)
        answer = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="Check the inbox")
        assert answer.text == "Nothing new in the inbox."
    await eventually(lambda: len(requests_of(sink)) == 4)
    runs = [r.run_id for r in requests_of(sink)]
    assert [r.index for r in requests_of(sink)] == [1, 1, 2, 1]  # after a pause, and then again at once
    assert len(set(runs)) == 3 and runs[1] == runs[2]


class NoPlainKeys(MemoryState):
    """A state whose plain keys (where roots' entries live) fail as they do while Redis is down."""

    async def recall(self, name: str) -> str | None:
        raise StateUnavailable("state backend down (test)")

    async def claim(self, name: str, ttl: float, value: str = "1") -> bool:
        raise StateUnavailable("state backend down (test)")


async def test_when_a_root_s_entry_cannot_be_read_its_requests_share_the_root_s_own_run(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    upstream.script = agent_step
    running = await start_proxy(settings_for(upstream.url), sink=sink, state=NoPlainKeys())
    client = openai.AsyncOpenAI(base_url=running.url + "/v1", api_key="sk-degraded", max_retries=0)
    try:
        await invoke(client)
        await invoke(client)
    finally:
        await client.close()
        await running.stop()
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert len({r.run_id for r in requests_of(sink)}) == 1  # the same on every replica while it lasts
    assert [r.index for r in requests_of(sink)] == [1, 2, 3, 4]


def voice_message(seed: int) -> dict[str, Any]:
    """A user's spoken question: audio only, no text (a voice app on Chat Completions)."""
    audio = base64.b64encode(random.Random(seed).randbytes(3000)).decode()
    return {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": audio, "format": "wav"}}]}


async def test_conversations_that_open_with_media_and_no_text_are_runs_of_their_own(
    make_proxy: ProxyFactory, sdk_client: SdkClient, upstream: FakeUpstream, sink: ListSink
) -> None:
    """Three voice chats, a picture sent on its own to the Responses API and one to Gemini: each is its own
    run, whose next turns stay in it. With no text to root them, they all made one run of the key (a voice
    app's every conversation, stopped together at the step limit of 3)."""
    upstream.script = lambda received: Reply.json(
        payloads.gemini_response("Heard you.")
        if "contents" in received.json()
        else payloads.response_object("Heard you.")
        if "input" in received.json()
        else payloads.chat_completion("Heard you.")
    )
    url = await make_proxy(guard={"detectors": {"max_requests": {"limit": 3}}})
    client = sdk_client(url, "sk-voice-app")
    for seed in range(3):
        asked: list[Any] = [voice_message(seed)]
        said = await client.chat.completions.create(model="gpt-4o-audio-preview", messages=asked)
        asked += [said.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "And then?"}]
        await client.chat.completions.create(model="gpt-4o-audio-preview", messages=asked)
    picture = "data:image/png;base64," + base64.b64encode(random.Random(7).randbytes(3000)).decode()
    image: Any = [{"role": "user", "content": [{"type": "input_image", "image_url": picture}]}]
    await client.responses.create(model="gpt-4o", input=image)
    gemini = genai.Client(api_key="gemini-key", http_options=types.HttpOptions(base_url=url))
    png = types.Part.from_bytes(data=random.Random(8).randbytes(3000), mime_type="image/png")
    await gemini.aio.models.generate_content(
        model="gemini-2.5-flash", contents=[types.Content(role="user", parts=[png])]
    )
    await eventually(lambda: len(requests_of(sink)) == 8)
    records = requests_of(sink)
    assert trips_of(sink) == []
    assert [r.index for r in records] == [1, 2, 1, 2, 1, 2, 1, 1]
    assert len({r.run_id for r in records}) == 5
