"""A Realtime session's responses, each in a `Passage`: admitted when the server announces it, ended when it is
done, the session told why and closed when its run is stopped, cut off when the session closes.

`RealtimeSocket` over a real guard (the default detectors, the in-memory state), fed the events a voice agent's
session carries.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.providers.openai_realtime import SESSIONS
from runguard.proxy.sockets.realtime import MAX_RESULTS, RealtimeSocket
from runguard.proxy.store.records import RequestRecord
from tests.e2e.faults import eventually
from tests.support.guards import guard_settings, make_context, make_guard
from tests.support.proxy import ListSink

CALL = {"type": "function_call", "name": "get_weather", "call_id": "c1", "arguments": '{"city": "Oslo"}'}
USAGE = {"input_tokens": 50, "output_tokens": 20, "output_token_details": {"audio_tokens": 15}}


def created(response_id: str) -> str:
    return orjson.dumps({"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}).decode()


def done(response_id: str, *output: dict[str, Any]) -> str:
    response = {"id": response_id, "status": "completed", "output": list(output), "usage": USAGE}
    return orjson.dumps({"type": "response.done", "response": response}).decode()


def output_of(call_id: str) -> str:
    item = {"type": "function_call_output", "call_id": call_id, "output": '{"temp": 3}'}
    return orjson.dumps({"type": "conversation.item.create", "item": item}).decode()


def records(sink: ListSink) -> list[RequestRecord]:
    return [r for r in sink.records if isinstance(r, RequestRecord)]


def session(sink: ListSink, run_usd: float = 100.0, run: str | None = "voice-run") -> RealtimeSocket:
    settings = guard_settings(guard={"detectors": {"budget": {"run_usd": run_usd}}})
    ctx = make_context(settings, make_guard(settings, sink=sink))
    return RealtimeSocket(ctx, "k_voice", SESSIONS, model="gpt-realtime", header_run=run, agent="concierge", tight=())


async def test_a_response_is_admitted_when_announced_and_ended_with_its_usage_when_done() -> None:
    sink = ListSink()
    voice = session(sink)
    assert await voice.before_client(created("r1")) is None
    assert records(sink) == []
    assert await voice.before_client(done("r1", CALL)) is None
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert (record.run_id, record.api, record.status, record.error) == ("voice-run", "realtime", 200, None)
    assert (record.input_tokens, record.output_tokens) == (50, 20) and record.tool_calls == ("get_weather",)


async def test_a_stopped_run_s_next_response_gets_runguard_s_error_event_instead() -> None:
    sink = ListSink()
    voice = session(sink, run_usd=0.000001)  # spent by the first response
    await voice.before_client(created("r1"))
    await voice.before_client(done("r1", CALL))
    assert await voice.from_client(output_of("c1")) is None  # a tool result: it goes upstream, read on its way
    stopped = await voice.before_client(created("r2"))
    assert stopped is not None
    event = orjson.loads(stopped)
    assert event["type"] == "error" and event["error"]["code"] == "runguard_budget"
    await eventually(lambda: len(records(sink)) == 2)
    assert records(sink)[1].blocked_by == "budget"
    assert await voice.before_client(done("r2")) is None  # its done event ends nothing: it was never admitted
    assert len(records(sink)) == 2


async def test_the_session_closing_ends_the_responses_it_cut_off() -> None:
    sink = ListSink()
    voice = session(sink, run=None)  # a session is a run of its own
    await voice.before_client(created("r1"))
    await voice.close("connection_closed")
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert (record.status, record.error) == (None, "connection_closed")
    assert record.run_id.startswith("r-")


async def test_other_events_pass_unread_and_a_flood_of_tool_results_is_not_read_further() -> None:
    sink = ListSink()
    voice = session(sink)
    assert await voice.before_client('{"type": "response.audio.delta", "delta": "AAAA"}') is None
    await voice.after_client('{"type": "response.audio.delta", "delta": "AAAA"}')
    for _ in range(MAX_RESULTS + 5):
        assert await voice.from_client(output_of("c1")) is None
    assert records(sink) == []
