"""Judging beside the relay, through the real proxy with the openai SDK: a response's end runs after its client
has the answer, and the run's next request waits for that verdict only while it is pending.

The state here holds back one run's response batches (the end's accounting, which adds the response's cost)
until the test lets them go, as a slow state backend would. The budget detector's verdict depends on that
batch: its cap is reached by the first response's cost, so the second request must be stopped, and never
reaches the upstream, however soon after the first answer it comes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import aiohttp
import openai
import pytest

from runguard.proxy.core.ops import Op, OpResult
from runguard.proxy.guard import accounting
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

RELEASE = accounting.release_ops()[0]  # the first op of every response batch (the in-flight slot given back)


class HeldState(MemoryState):
    """The in-memory state, whose response batches of the runs in `held` wait for `let_go`."""

    never_waits = False

    def __init__(self) -> None:
        super().__init__()
        self.held: set[str] = set()
        self.let_go = asyncio.Event()
        self.waiting = 0  # response batches held back now

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        if ids.run.rpartition("/")[2] in self.held and RELEASE in ops:  # a run's state id is <tenant>/<run>
            self.waiting += 1
            await self.let_go.wait()
            self.waiting -= 1
        return await super().execute(ids, ops)


@pytest.fixture
async def held() -> AsyncIterator[tuple[str, FakeUpstream, HeldState, ListSink]]:
    upstream = await FakeUpstream().start()
    # Any response's cost is over the run's budget of $0.000001: the run's second request is stopped.
    upstream.script = lambda _: Reply.json(payloads.chat_completion("done"))
    state, sink = HeldState(), ListSink()
    proxy = await start_proxy(
        settings_for(upstream.url, guard={"detectors": {"budget": {"run_usd": 0.000001}}}), sink=sink, state=state
    )
    yield proxy.url, upstream, state, sink
    state.let_go.set()
    await proxy.stop()
    await upstream.stop()


def _client(url: str, run: str) -> openai.AsyncOpenAI:
    # A client of its own per request: a new connection, so nothing but the guard orders the two requests.
    return openai.AsyncOpenAI(
        base_url=url + "/v1", api_key="sk-test-judging", default_headers={"X-Run-Id": run}, max_retries=0
    )


async def _ask(url: str, run: str) -> str | None:
    client = _client(url, run)
    try:
        done = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "total?"}]
        )
        return done.choices[0].message.content
    finally:
        await client.close()


async def test_the_answer_goes_out_before_its_end_and_the_runs_next_request_waits_for_that_verdict(
    held: tuple[str, FakeUpstream, HeldState, ListSink],
) -> None:
    url, upstream, state, sink = held
    state.held.add("run-a")
    assert await asyncio.wait_for(_ask(url, "run-a"), 5) == "done"  # answered while its end is held back
    await eventually(lambda: state.waiting == 1)
    assert sink.records == []  # its end (accounting, record) has not run

    second = asyncio.ensure_future(_ask(url, "run-a"))
    await asyncio.sleep(0.3)
    assert not second.done()  # the run's next request waits for the pending verdict...
    assert len(upstream.received) == 1  # ...before anything goes upstream

    state.let_go.set()
    with pytest.raises(openai.RateLimitError) as caught:
        await asyncio.wait_for(second, 5)
    assert caught.value.code == "runguard_budget"  # the first response's cost counted: the run is over budget
    assert len(upstream.received) == 1


async def test_another_runs_requests_do_not_wait_for_a_pending_verdict(
    held: tuple[str, FakeUpstream, HeldState, ListSink],
) -> None:
    url, _upstream, state, sink = held
    state.held.add("run-a")
    assert await asyncio.wait_for(_ask(url, "run-a"), 5) == "done"
    await eventually(lambda: state.waiting == 1)
    assert await asyncio.wait_for(_ask(url, "run-b"), 5) == "done"  # run-a's end still held back
    await eventually(lambda: state.waiting == 1)
    state.let_go.set()
    await eventually(lambda: len(sink.records) == 2)
    assert sorted(r.run_id for r in sink.records if isinstance(r, RequestRecord)) == ["run-a", "run-b"]


async def test_a_streamed_answer_is_judged_beside_the_relay_too(
    held: tuple[str, FakeUpstream, HeldState, ListSink],
) -> None:
    url, upstream, state, _sink = held
    upstream.script = lambda _: Reply.sse(payloads.chat_stream(with_usage=True))
    state.held.add("run-s")
    client = _client(url, "run-s")
    try:
        stream = await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "total?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        assert chunks  # the whole stream reached the client while its end is held back
        await eventually(lambda: state.waiting == 1)
        second = asyncio.ensure_future(_ask(url, "run-s"))
        await asyncio.sleep(0.3)
        assert not second.done()
        state.let_go.set()
        with pytest.raises(openai.RateLimitError):
            await asyncio.wait_for(second, 5)
    finally:
        await client.close()
    assert len(upstream.received) == 1


async def test_inline_judging_holds_the_connection_and_does_not_order_the_runs_requests(
    upstream: FakeUpstream,
) -> None:
    """`guard.judging: inline` is the handler running the end: the run's next request on another connection
    is not made to wait for it (what beside the relay adds)."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("done"))
    state = HeldState()
    settings = settings_for(upstream.url, guard={"judging": "inline", "detectors": {"budget": {"run_usd": 0.000001}}})
    proxy = await start_proxy(settings, sink=ListSink(), state=state)
    state.held.add("run-i")
    try:
        assert await asyncio.wait_for(_ask(proxy.url, "run-i"), 5) == "done"
        await eventually(lambda: state.waiting == 1)
        assert await asyncio.wait_for(_ask(proxy.url, "run-i"), 5) == "done"  # not stopped: the cost not counted yet
        assert len(upstream.received) == 2
    finally:
        state.let_go.set()
        await proxy.stop()


async def _in_flight(url: str, count: int, within: float = 2.0) -> None:
    """Wait until the proxy serves `count` provider requests at once (its `runguard_in_flight_requests`)."""
    deadline = asyncio.get_running_loop().time() + within
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(url + "/runguard/metrics") as scraped:
                if f"runguard_in_flight_requests {float(count)}" in await scraped.text():
                    return
            assert asyncio.get_running_loop().time() < deadline, f"never {count} requests in flight"
            await asyncio.sleep(0.01)


async def test_in_memory_a_follower_sent_on_the_stream_s_last_event_waits_for_its_verdict(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """With the in-memory state a stream's end is judged once the upstream's body has ended, which can come
    after the client has the last event. A follower sent on another connection the moment the client has
    `[DONE]` waits for that verdict (the stream's end is marked pending before its last event goes out): the
    stream took the run past its token cap, so the follower is stopped and never reaches the upstream."""
    rest = asyncio.Event()

    def answers(request: Received) -> Reply:
        if request.json().get("stream"):
            events = b"".join(payloads.chat_stream("streamed", with_usage=True))  # 13 tokens, then [DONE]
            return Reply.sse([events, b": the body ends later\n\n"], hold=rest)
        return Reply.json(payloads.chat_completion("slipped through"))

    upstream.script = answers
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    headers = {"Authorization": "Bearer sk-ends", "X-Run-Id": "stream-end", "X-RunGuard-Max-Tokens": "10"}
    ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}]}
    chat = running.url + "/v1/chat/completions"
    try:
        async with aiohttp.ClientSession() as streaming, aiohttp.ClientSession() as following:
            async with streaming.post(chat, json={**ask, "stream": True}, headers=headers) as stream:
                seen = b""
                while b"[DONE]" not in seen:
                    seen += await stream.content.readany()
                follower = asyncio.ensure_future(following.post(chat, json=ask, headers=headers))
                await _in_flight(running.url, 2)  # the follower is in, its stream's body not ended yet
                rest.set()
                await stream.read()
            answer = await follower
            status, trip = answer.status, answer.headers.get("x-runguard-trip")
            answer.release()
    finally:
        rest.set()
        await running.stop()
    assert (status, trip) == (429, "max_tokens")
    assert len(upstream.received) == 1
