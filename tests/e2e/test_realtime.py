"""A Realtime voice session through the proxy, with the openai SDK's realtime client.

Each response the server announces (`response.created`) is admitted as a request of the session's run
before the client hears of it, and its `response.done` is accounted: tokens, the audio apart, cost.
A run that is stopped gets an `error` event with RunGuard's code, and the session is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import openai
import orjson
import pytest
import websockets

from tests.conftest import ProxyFactory
from tests.e2e.faults import eventually, requests_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream

# gpt-realtime: 1,000 input tokens of which 800 heard, 500 output tokens of which 400 spoken:
# 200 * $4 + 800 * $32 + 100 * $16 + 400 * $64 per 1M = $0.0536 a response (as text, $0.012).
USAGE = {
    "total_tokens": 1500,
    "input_tokens": 1000,
    "output_tokens": 500,
    "input_token_details": {"text_tokens": 200, "audio_tokens": 800, "cached_tokens": 0},
    "output_token_details": {"text_tokens": 100, "audio_tokens": 400},
}
USD = (200 * 4 + 800 * 32 + 100 * 16 + 400 * 64) / 1e6

# A turn late in a call: the call so far comes again, mostly from the cache. 20,000 input tokens, 19,000
# heard; 18,500 cached, 18,000 of them audio. $0.0686 a turn at gpt-realtime's cached audio rate ($0.40 per
# 1M), $0.6356 with every heard token at the audio rate ($32).
LATE = {
    "total_tokens": 20500,
    "input_tokens": 20000,
    "output_tokens": 500,
    "input_token_details": {
        "text_tokens": 1000,
        "audio_tokens": 19000,
        "cached_tokens": 18500,
        "cached_tokens_details": {"text_tokens": 500, "audio_tokens": 18000},
    },
    "output_token_details": {"text_tokens": 100, "audio_tokens": 400},
}
LATE_USD = (500 * 4 + 500 * 0.4 + 1000 * 32 + 18000 * 0.4 + 100 * 16 + 400 * 64) / 1e6


def voice_server(calls: bool = False, status: str = "completed", usage: dict[str, Any] = USAGE) -> Any:
    """The upstream's answers to a client's `response.create`: the response announced, a piece of audio, done."""
    count = 0

    def answer(message: str | bytes) -> Sequence[str | bytes | int]:
        nonlocal count
        if not isinstance(message, str) or '"response.create"' not in message:
            return []
        count += 1
        rid = f"resp_{count}"
        output: list[dict[str, Any]] = [
            {"id": f"item_{count}", "type": "message", "role": "assistant", "content": [{"type": "output_audio"}]}
        ]
        if calls:
            output.append(
                {"type": "function_call", "name": "lookup_order", "call_id": f"call_{count}", "arguments": "{}"}
            )
        response = {"id": rid, "object": "realtime.response", "status": "in_progress", "output": [], "usage": None}
        done = {**response, "status": status, "output": output, "usage": usage}
        events = [
            {"type": "response.created", "event_id": f"ev_{count}a", "response": response},
            {"type": "response.output_audio.delta", "event_id": f"ev_{count}b", "response_id": rid, "delta": "AAAA"},
            {"type": "response.done", "event_id": f"ev_{count}c", "response": done},
        ]
        return [orjson.dumps(event).decode() for event in events]

    return answer


async def _turns(
    proxy_url: str,
    turns: int,
    run: str | None,
    pause: float = 0.0,
    output: Callable[[int], str] | None = None,
) -> list[Any]:
    """Ask for `turns` responses, each awaited to its end, `pause` seconds apart; every event the client got.
    `output(turn)`: after each response, send it as the output of the response's function call."""
    headers = {"X-Run-Id": run} if run else {}
    client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="sk-voice", default_headers=headers)
    got: list[Any] = []
    async with client.realtime.connect(model="gpt-realtime") as connection:
        for turn in range(turns):
            await asyncio.sleep(pause)
            await connection.response.create()
            async for event in connection:
                got.append(event)
                if event.type == "response.done" and output is not None:
                    (call,) = [item for item in event.response.output or [] if item.type == "function_call"]
                    item: Any = {"type": "function_call_output", "call_id": call.call_id, "output": output(turn)}
                    await connection.conversation.item.create(item=item)
                if event.type in ("response.done", "error"):
                    break
            if got[-1].type == "error":
                break
        if got[-1].type == "error":
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await connection.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008  # policy violation
    return got


async def test_a_session_s_responses_are_accounted_with_their_audio_and_calls(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.socket_script = voice_server(calls=True)
    got = await _turns(await make_proxy(), 2, "call-1")
    assert [e.type for e in got] == ["response.created", "response.output_audio.delta", "response.done"] * 2
    await eventually(lambda: len(requests_of(sink)) == 2)
    records = requests_of(sink)
    assert {(r.run_id, r.api, r.model, r.streamed) for r in records} == {("call-1", "realtime", "gpt-realtime", True)}
    assert [(r.input_tokens, r.output_tokens, r.tool_calls) for r in records] == [(1000, 500, ("lookup_order",))] * 2
    assert [r.usd for r in records] == [pytest.approx(USD)] * 2


async def test_a_session_past_its_budget_is_told_why_and_closed(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """$0.0536 a response against a $0.10 budget: the third response is stopped when the server announces it."""
    upstream.socket_script = voice_server()
    got = await _turns(await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.10}}}), 5, "call-2")
    assert [e.type for e in got] == [*["response.created", "response.output_audio.delta", "response.done"] * 2, "error"]
    assert got[-1].error.code == "runguard_budget" and "call-2" in got[-1].error.message
    assert len(upstream.socket_received) == 3  # the third response.create went out; its response was cut off
    await eventually(lambda: len(requests_of(sink)) == 3)
    assert [r.blocked_by for r in requests_of(sink)] == [None, None, "budget"]


async def test_a_long_call_s_cached_audio_is_counted_at_its_cached_rate(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """Six late turns of a call, $0.41 in all, under a $0.50 budget: none is stopped (counted at the audio
    rate, they were $0.64 each, and the second turn was stopped)."""
    upstream.socket_script = voice_server(usage=LATE)
    got = await _turns(await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.50}}}), 6, "call-5")
    assert [e.type for e in got].count("response.done") == 6 and got[-1].type == "response.done"
    await eventually(lambda: len(requests_of(sink)) == 6)
    assert [(r.blocked_by, r.usd) for r in requests_of(sink)] == [(None, pytest.approx(LATE_USD))] * 6


async def test_sessions_without_a_run_header_are_runs_of_their_own(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.socket_script = voice_server()
    proxy = await make_proxy(guard={"detectors": {"budget": {"run_usd": 0.10}}})
    for _ in range(3):  # each session spends $0.107 of its own $0.10 budget: none is stopped
        assert [e.type for e in await _turns(proxy, 2, None)][-1] == "response.done"
    await eventually(lambda: len(requests_of(sink)) == 6)
    runs = [r.run_id for r in requests_of(sink)]
    assert len(set(runs)) == 3 and runs[0] == runs[1]


async def test_answers_cut_short_by_the_caller_are_no_upstream_failures(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """A caller who speaks over the assistant cancels its answer: eight in a row are not a failing upstream."""
    upstream.socket_script = voice_server(status="cancelled")
    got = await _turns(await make_proxy(), 8, "call-3")
    assert [e.type for e in got] == ["response.created", "response.output_audio.delta", "response.done"] * 8
    await eventually(lambda: len(requests_of(sink)) == 8)
    assert [(r.blocked_by, r.error, r.finish_reason, r.usd) for r in requests_of(sink)] == [
        (None, None, "cancelled", pytest.approx(USD))
    ] * 8


async def test_a_long_call_is_not_stopped_for_its_turns_or_its_length(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """A call's responses are its caller's turns, not an agent's steps: the step and time caps leave them be."""
    upstream.socket_script = voice_server()
    proxy = await make_proxy(guard={"detectors": {"max_requests": {"limit": 2}, "timeout": {"seconds": 0.05}}})
    got = await _turns(proxy, 4, "call-4", pause=0.03)
    assert [e.type for e in got].count("response.done") == 4
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert [r.blocked_by for r in requests_of(sink)] == [None] * 4


async def test_an_event_that_cannot_be_read_passes_unread(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    garbled = '{"type": "response.created", "response": '  # cut off: not JSON
    upstream.socket_script = lambda message: [garbled, '{"type": "response.done", "response": "not an object"}']
    client = openai.AsyncOpenAI(base_url=await make_proxy() + "/v1", api_key="sk-voice")
    async with client.realtime.connect(model="gpt-realtime") as connection:
        await connection.send({"type": "session.update", "session": {"type": "realtime"}})
        assert [await connection.recv_bytes(), await connection.recv_bytes()] == [
            garbled.encode(),
            b'{"type": "response.done", "response": "not an object"}',
        ]
    await asyncio.sleep(0.1)
    assert requests_of(sink) == []


async def test_a_voice_agent_s_tool_loop_is_stopped_by_its_results(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """Each answer calls `lookup_order` and the client sends back the same soft error: the third identical result
    goes out with the fourth response's turn, which is stopped when the server announces it."""
    upstream.socket_script = voice_server(calls=True)
    got = await _turns(await make_proxy(), 6, None, output=lambda turn: "order system unavailable, try again")
    assert got[-1].type == "error" and got[-1].error.code == "runguard_non_progress"
    assert [e.type for e in got].count("response.done") == 3
    await eventually(lambda: len(requests_of(sink)) == 4)
    assert [r.blocked_by for r in requests_of(sink)] == [None, None, None, "non_progress"]


async def test_a_voice_agent_whose_tool_answers_anew_goes_on(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.socket_script = voice_server(calls=True)
    got = await _turns(await make_proxy(), 6, None, output=lambda turn: f'{{"order": {turn}, "status": "shipped"}}')
    assert [e.type for e in got].count("response.done") == 6
    await eventually(lambda: len(requests_of(sink)) == 6)
    assert [r.blocked_by for r in requests_of(sink)] == [None] * 6
