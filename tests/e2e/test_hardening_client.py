"""Client faults and shutdown: an abandoned request cancels its upstream call and is still recorded;
a graceful stop lets in-flight streams finish."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import aiohttp
import openai
import orjson
import pytest

from runguard.proxy.core.ops import Op, OpResult, Put, Scope
from runguard.proxy.guard import breaker
from runguard.proxy.guard.accounting import release_ops, request_ops
from runguard.proxy.relay.context import CONTEXT
from runguard.proxy.runs import tenants
from runguard.proxy.runs.keys import ANONYMOUS, KeyHasher
from runguard.proxy.serve.app import create_app
from runguard.proxy.serve.server import Running, start
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

CHAT = "/v1/chat/completions"


async def _serving(upstream: FakeUpstream, sink: ListSink, grace: float) -> Running:
    """The proxy as `serve` runs it: the grace period comes from the settings."""
    settings = settings_for(upstream.url, server={"shutdown_grace_seconds": grace})
    return await start(create_app(settings, sink=sink), "127.0.0.1", 0, settings.server.shutdown_grace_seconds)


def _chat(stream: bool = False) -> bytes:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a long question"}], "stream": stream}
    return orjson.dumps(body)


async def test_client_gone_while_sending_its_body(upstream: FakeUpstream, sink: ListSink) -> None:
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    reading = running.runner.app[CONTEXT].reading  # handlers waiting for the rest of a body
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
        head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
        writer.write(head.encode() + _chat()[:40])
        await writer.drain()
        await eventually(lambda: bool(reading), within=5.0)  # the handler is reading the body
        writer.transport.abort()
        await eventually(lambda: not reading, within=5.0)  # and is done with it
        assert upstream.received == []
        assert requests_of(sink) == []
        upstream.script = lambda _: Reply.json(payloads.chat_completion("next"))
        async with aiohttp.ClientSession() as session, session.post(running.url + CHAT, data=_chat()) as r:
            assert r.status == 200
    finally:
        await running.stop()


async def test_client_gone_before_the_answer_cancels_upstream_and_is_recorded(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    upstream.script = lambda _: Reply(200, orjson.dumps(payloads.chat_completion("too late")), delay=5.0)
    async with aiohttp.ClientSession() as session:
        waiting = asyncio.create_task(session.post(proxy_url + CHAT, data=_chat(), headers={"X-Run-Id": "impatient"}))
        await eventually(lambda: len(upstream.received) == 1)  # the upstream holds the whole request: the client leaves
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
    await eventually(lambda: upstream.cancelled == 1 and bool(requests_of(sink)))
    assert upstream.in_flight == 0
    record = requests_of(sink)[-1]
    assert (record.run_id, record.status, record.error) == ("impatient", None, "client_disconnected")


async def test_client_gone_mid_stream_records_the_partial_usage(
    upstream: FakeUpstream, proxy_url: str, sink: ListSink
) -> None:
    chunks = payloads.chat_stream("word " * 50)
    upstream.script = lambda _: Reply.sse(chunks[:2] + [chunks[2]] * 30, delay=0.05)
    async with aiohttp.ClientSession() as session:
        response = await session.post(proxy_url + CHAT, data=_chat(stream=True), headers={"X-Run-Id": "leaver"})
        got = b""
        while b"word" not in got:
            got += await response.content.readany()
        response.close()
    await eventually(lambda: upstream.cancelled == 1 and bool(requests_of(sink)))
    record = requests_of(sink)[-1]
    assert (record.run_id, record.error) == ("leaver", "client_disconnected")
    assert record.usage_estimated and record.output_tokens > 0  # the partial output seen, not zero
    assert record.input_tokens > 0


class SlowAfterResponse(MemoryState):
    """In-memory state whose batch after a response waits for `go`, as a Redis round trip may while
    the client, which has its whole answer by then, closes its connection."""

    never_waits = False

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        if len(ops) > 1 and ops[0] == release_ops()[0]:  # a response's usage, cost and detector plans
            await self.go.wait()
        return await super().execute(ids, ops)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_that_closes_its_connection_once_answered_is_still_recorded_and_counted(
    upstream: FakeUpstream, sink: ListSink, stream: bool
) -> None:
    # The server cancels a handler whose client disconnects; the work after a response that went out
    # whole (usage, cost, detectors, the record) must not go with it. SDK clients opened per call do this.
    call = ("call_1", "search_invoices", '{"query": "invoice total"}')
    if stream:
        upstream.script = lambda _: Reply.sse(_tool_call_stream(call))
    else:
        upstream.script = lambda _: Reply.json(payloads.chat_completion(tool_calls=[call], usage=(1000, 200)))
    state = SlowAfterResponse()
    running = await start_proxy(settings_for(upstream.url), sink=sink, state=state)
    try:
        headers = {"X-Run-Id": "one-shot"}
        async with openai.AsyncOpenAI(
            base_url=running.url + "/v1", api_key="sk-one-shot", max_retries=0, default_headers=headers
        ) as client:
            ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "find the invoice"}]}
            if stream:
                async with client.chat.completions.stream(**ask, stream_options={"include_usage": True}) as events:
                    done = await events.get_final_completion()
            else:
                done = await client.chat.completions.create(**ask)
        assert done.choices[0].message.tool_calls
        server = running.runner.server
        assert server is not None
        await eventually(lambda: not server.connections)  # the proxy saw the client go
        state.go.set()
        await eventually(lambda: bool(requests_of(sink)))
        (record,) = requests_of(sink)
        assert (record.input_tokens, record.output_tokens, record.tool_calls) == (1000, 200, ("search_invoices",))
        assert (record.status, record.error) == (200, None)
        run = await state.read_scope(
            Scope.RUN, tenants.state_id(KeyHasher(b"test-salt").hash("sk-one-shot"), "one-shot")
        )
        assert (run["core.in"], run["core.out"], run["core.inflight"]) == (1000.0, 200.0, 0.0)
    finally:
        await running.stop()


async def test_a_follow_up_sent_while_the_previous_response_is_still_accounted_finds_its_run(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """Responses API without X-Run-Id: the follow-up names its run only by `previous_response_id`. A fast
    client sends it while the proxy still accounts for the response (a Redis round trip): it must find it,
    and wait for that response's verdict before it goes upstream."""
    call = ("call_1", "lookup", '{"q": "x"}')
    answers = iter([payloads.response_object(calls=[call]) | {"id": "resp_1"}, payloads.response_object("done")])
    upstream.script = lambda _: Reply.json(next(answers))
    state = SlowAfterResponse()
    running = await start_proxy(settings_for(upstream.url), sink=sink, state=state)
    try:
        # Two clients, two connections (on one keep-alive connection the server reads the next request only
        # once the handler of the last one is done): a client pool, another worker or a retry on a new socket.
        async with (
            openai.AsyncOpenAI(base_url=running.url + "/v1", api_key="sk-chain", max_retries=0) as one,
            openai.AsyncOpenAI(base_url=running.url + "/v1", api_key="sk-chain", max_retries=0) as other,
        ):
            first = await one.responses.create(model="gpt-4o", input="look it up")
            output = [{"type": "function_call_output", "call_id": "call_1", "output": "found"}]
            follow_up = other.responses.create(model="gpt-4o", previous_response_id=first.id, input=output)  # type: ignore[arg-type]
            sending = asyncio.ensure_future(follow_up)
            await asyncio.sleep(0.2)
            assert not sending.done() and len(upstream.received) == 1  # waits for the first response's verdict
            state.go.set()
            second = await asyncio.wait_for(sending, 5)
        assert second.output_text == "done"
        await eventually(lambda: len(requests_of(sink)) == 2)
        runs = {record.run_id for record in requests_of(sink)}
        assert len(runs) == 1, runs
    finally:
        await running.stop()


class ReplyInFlight(MemoryState):
    """In-memory state whose request batch runs, then keeps its reply back until `go`: a Redis round
    trip whose command the server ran while the client gave up waiting for the proxy."""

    never_waits = False

    def __init__(self) -> None:
        super().__init__()
        self.ran, self.go = asyncio.Event(), asyncio.Event()

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        results = await super().execute(ids, ops)
        if ops and ops[0] == request_ops(0.0, "")[0] and not self.go.is_set():  # the request's own batch
            self.ran.set()
            await self.go.wait()
        return results


async def test_a_client_gone_while_its_request_is_being_admitted_gives_its_in_flight_slot_back(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    state = ReplyInFlight()
    running = await start_proxy(settings_for(upstream.url), sink=sink, state=state)
    try:
        async with aiohttp.ClientSession() as session:
            sending = asyncio.create_task(session.post(running.url + CHAT, data=_chat(), headers={"X-Run-Id": "gone"}))
            await state.ran.wait()
            sending.cancel()  # the client gives up: its connection closes
            with pytest.raises(asyncio.CancelledError):
                await sending
        server = running.runner.server
        assert server is not None
        await eventually(lambda: not server.connections)  # the proxy saw the client go
        run = await state.read_scope(Scope.RUN, tenants.state_id(ANONYMOUS, "gone"))
        assert run["core.inflight"] == 1.0  # the batch ran: the slot is taken
        state.go.set()
        for _ in range(50):  # the slot is given back in the background, once the batch has answered
            if (await state.read_scope(Scope.RUN, tenants.state_id(ANONYMOUS, "gone")))["core.inflight"] == 0.0:
                break
            await asyncio.sleep(0.02)
        assert (await state.read_scope(Scope.RUN, tenants.state_id(ANONYMOUS, "gone")))["core.inflight"] == 0.0
        assert not upstream.received  # the request never went on
    finally:
        await running.stop()


class SlowBreakerOpening(MemoryState):
    """In-memory state whose batch opening a breaker waits for `go`: a Redis round trip still on its way
    when the client of the request that tripped gives up."""

    never_waits = False

    def __init__(self) -> None:
        super().__init__()
        self.opening, self.go = asyncio.Event(), asyncio.Event()

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        if any(isinstance(op, Put) and op.field == breaker.FIELD and op.value for op in ops):
            self.opening.set()
            await self.go.wait()
        return await super().execute(ids, ops)


async def test_a_client_gone_while_its_request_s_trip_opens_the_breaker_gives_its_slot_back(
    upstream: FakeUpstream, sink: ListSink
) -> None:
    """The request's state batch has run (its slot is taken) and a detector stops it before it goes upstream;
    the client leaves while the breaker is being opened. The breaker opens all the same, and the slot is given
    back (it was held until the run expired, counting toward over_spawn)."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("done"))
    state = SlowBreakerOpening()
    settings = settings_for(upstream.url, guard={"detectors": {"max_requests": {"limit": 1}}})
    running = await start_proxy(settings, sink=sink, state=state)
    headers = {"X-Run-Id": "gone-tripping", "Content-Type": "application/json"}
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(running.url + CHAT, data=_chat(), headers=headers) as first:
                assert first.status == 200
            await eventually(lambda: len(requests_of(sink)) == 1)
            sending = asyncio.create_task(session.post(running.url + CHAT, data=_chat(), headers=headers))
            await state.opening.wait()  # the 2nd request tripped max_requests: its breaker is being opened
            sending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sending
        server = running.runner.server
        assert server is not None
        await eventually(lambda: not server.connections)  # the proxy saw the client go
        state.go.set()
        for _ in range(50):  # the rest of the admission runs to its end in the background
            if (await state.read_scope(Scope.RUN, tenants.state_id(ANONYMOUS, "gone-tripping"))).get(
                "core.inflight"
            ) == 0.0:
                break
            await asyncio.sleep(0.02)
        run = await state.read_scope(Scope.RUN, tenants.state_id(ANONYMOUS, "gone-tripping"))
        assert run["core.inflight"] == 0.0
        assert run[breaker.FIELD]  # the trip's breaker is open: the run's next request is answered locally
        assert len(upstream.received) == 1
    finally:
        await running.stop()


def _tool_call_stream(call: tuple[str, str, str]) -> list[bytes]:
    call_id, name, arguments = call
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-4o-mini"}
    opened = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    rest = {"index": 0, "function": {"arguments": arguments}}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [opened]}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [rest]}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}},
    ]
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


async def test_graceful_shutdown_drains_an_in_flight_stream(upstream: FakeUpstream) -> None:
    chunks = payloads.chat_stream("drained to the end", with_usage=True)
    upstream.script = lambda _: Reply.sse(chunks, delay=0.12)
    sink = ListSink()
    running = await _serving(upstream, sink, grace=3.0)
    async with aiohttp.ClientSession() as session:
        response = await session.post(running.url + CHAT, data=_chat(stream=True))
        first = await response.content.readany()
        stopping = asyncio.create_task(running.stop())
        shutdown = running.runner.app[CONTEXT].shutdown
        await eventually(lambda: shutdown.begun, within=5.0)  # the stop is under way...
        assert not stopping.done()  # ...and waits for the stream
        rest = await response.read()
        await stopping
    assert first + rest == b"".join(chunks)
    record = requests_of(sink)[-1]
    assert (record.status, record.error, record.output_tokens, record.usage_estimated) == (200, None, 4, False)


async def test_shutdown_grace_period_is_bounded(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("never ends"), stall_after=1)
    running = await _serving(upstream, ListSink(), grace=0.3)
    async with aiohttp.ClientSession() as session:
        response = await session.post(running.url + CHAT, data=_chat(stream=True))
        await response.content.readany()
        started = asyncio.get_running_loop().time()
        await running.stop()
        assert asyncio.get_running_loop().time() - started < 1.5
        response.close()


async def test_shutdown_does_not_wait_the_grace_period_for_a_body_that_stopped_arriving(
    upstream: FakeUpstream,
) -> None:
    # Once the server stops, aiohttp drops the bytes that reach it: a handler still waiting for the
    # rest of a body would otherwise hold the shutdown for the whole grace period.
    sink = ListSink()
    running = await _serving(upstream, sink, grace=30.0)
    host, port = running.url.removeprefix("http://").split(":")
    _reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
    writer.write(head.encode() + _chat()[:40])
    await writer.drain()
    ctx = running.runner.app[CONTEXT]
    await eventually(lambda: bool(ctx.reading), within=5.0)  # the handler is waiting for the other 4960 bytes
    started = asyncio.get_running_loop().time()
    await running.stop()
    assert asyncio.get_running_loop().time() - started < 10.0  # not the 30 s grace
    writer.close()
    assert upstream.received == [] and requests_of(sink) == []


async def test_a_body_still_on_its_way_when_the_server_stops_is_answered_503(upstream: FakeUpstream) -> None:
    # After the stop began, the rest of the body will never be read: a provider 503 tells the SDK to retry.
    sink = ListSink()
    app = create_app(settings_for(upstream.url), sink=sink)
    running = await start(app, "127.0.0.1", 0, 5.0)
    try:
        app[CONTEXT].stopping.set()  # as on_shutdown does, without closing the connections yet
        host, port = running.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
        writer.write(head.encode() + _chat()[:40])
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5.0)
        writer.close()
    finally:
        await running.stop()
    assert status_line.startswith(b"HTTP/1.1 503")
    assert upstream.received == []
