"""A Responses WebSocket's requests, each in a `Passage`: admitted when sent, ended by its lane's terminal event,
answered on the socket when stopped, ended as cut off when the socket closes.

`ResponsesSocket` over a real guard (the default detectors, the in-memory state), fed the messages a client and
the provider would exchange.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runguard.proxy.guard.passage import CLIENT_LEFT
from runguard.proxy.providers.openai_responses import socket
from runguard.proxy.providers.openai_responses.spec import SPEC
from runguard.proxy.sockets.responses import SHUTDOWN, UPSTREAM_CLOSED, ResponsesSocket
from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.support.guards import guard_settings, make_context, make_guard
from tests.support.proxy import ListSink

RUN = "socket-run"


def create(lane: str | None = None, text: str = "Summarise the inbox") -> str:
    message: dict[str, Any] = {"type": "response.create", "model": "gpt-4o-mini", "input": text}
    if lane is not None:
        message["stream_id"] = lane
    return orjson.dumps(message).decode()


def answered(lane: str | None = None) -> list[str]:
    more = {"stream_id": lane} if lane is not None else {}
    return [orjson.dumps({**event, **more}).decode() for event in payloads.responses_events(payloads.response_object())]


def records(sink: ListSink) -> list[RequestRecord]:
    return [r for r in sink.records if isinstance(r, RequestRecord)]


def socket_for(sink: ListSink, limit: int = 100) -> ResponsesSocket:
    settings = guard_settings(guard={"detectors": {"max_requests": {"limit": limit}}})
    ctx = make_context(settings, make_guard(settings, sink=sink))
    return ResponsesSocket(ctx, "k_socket", SPEC, socket, header_run=RUN, agent="writer", tight=())


async def test_a_request_goes_upstream_and_its_lane_s_terminal_event_ends_it_with_its_usage() -> None:
    sink = ListSink()
    guarded = socket_for(sink)
    assert await guarded.from_client(create()) is None  # sent upstream
    for event in answered()[:-1]:
        await guarded.after_client(event)
    assert records(sink) == []  # not ended before its terminal event
    await guarded.after_client(answered()[-1])
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert (record.run_id, record.status, record.error, record.agent) == (RUN, 200, None, "writer")
    assert record.streamed and record.input_tokens > 0 and not record.usage_estimated


async def test_lanes_end_their_own_requests_in_order() -> None:
    sink = ListSink()
    guarded = socket_for(sink)
    assert await guarded.from_client(create("a", "first task for lane a")) is None
    assert await guarded.from_client(create("b", "first task for lane b")) is None
    for event in answered("b"):
        await guarded.after_client(event)
    await eventually(lambda: len(records(sink)) == 1)
    assert records(sink)[0].index == 2  # lane b's request, sent second, ended first
    for event in answered("a"):
        await guarded.after_client(event)
    await eventually(lambda: len(records(sink)) == 2)


async def test_a_stopped_request_is_answered_on_its_lane_and_never_goes_upstream() -> None:
    sink = ListSink()
    guarded = socket_for(sink, limit=1)
    assert await guarded.from_client(create("a")) is None
    for event in answered("a"):
        await guarded.after_client(event)
    answer = await guarded.from_client(create("a", "and again"))
    assert answer is not None
    (message,) = answer
    said = orjson.loads(message)
    assert (said["type"], said["stream_id"], said["status"]) == ("error", "a", 429)
    await eventually(lambda: len(records(sink)) == 2)
    assert records(sink)[1].blocked_by == "max_requests" and records(sink)[1].status == 429


async def test_messages_that_are_not_requests_pass_and_admit_nothing() -> None:
    sink = ListSink()
    guarded = socket_for(sink)
    assert await guarded.from_client('{"type": "response.steer", "input": "faster"}') is None
    assert await guarded.from_client("not json at all") is None
    assert await guarded.before_client(answered()[0]) is None
    await guarded.after_client(answered()[-1])  # no request waits on it
    await guarded.close(CLIENT_LEFT)
    assert records(sink) == []


@pytest.mark.parametrize("reason", [UPSTREAM_CLOSED, CLIENT_LEFT, SHUTDOWN])
async def test_the_socket_closing_ends_its_waiting_requests_as_cut_off(reason: str) -> None:
    sink = ListSink()
    guarded = socket_for(sink)
    assert await guarded.from_client(create("a")) is None
    await guarded.after_client(answered("a")[0])
    await guarded.close(reason)
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert (record.status, record.error) == (None, reason)


@pytest.mark.parametrize(("reason", "fails"), [(UPSTREAM_CLOSED, True), (CLIENT_LEFT, False), (SHUTDOWN, False)])
async def test_only_a_provider_closing_mid_answer_counts_as_its_failure(reason: str, fails: bool) -> None:
    """`retry_cascade` stops a key and model after two upstream failures in a row, whatever the run. Two
    sockets cut off mid-answer by their clients (an agent interrupted) or by the proxy stopping are no such
    failures, and a new run on the key and model goes through; two closed by the provider stop it."""
    sink = ListSink()
    settings = guard_settings()
    ctx = make_context(settings, make_guard(settings, sink=sink))
    for n in range(2):
        guarded = ResponsesSocket(ctx, "k_socket", SPEC, socket, header_run=f"cut-{n}", agent="writer", tight=())
        assert await guarded.from_client(create()) is None
        await guarded.after_client(answered()[0])
        await guarded.close(reason)
    await eventually(lambda: len(records(sink)) == 2)
    fresh = ResponsesSocket(ctx, "k_socket", SPEC, socket, header_run="fresh", agent="writer", tight=())
    answer = await fresh.from_client(create())
    if fails:
        assert answer is not None and "retry_cascade" in answer[0]
    else:
        assert answer is None


LONE_SURROGATE = '{"type": "response.create", "model": "gpt-4o-mini", "input": "cut mid-emoji \\ud83d"}'


def test_the_message_with_a_lone_surrogate_is_no_json_the_proxy_reads() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(LONE_SURROGATE)


async def test_a_request_that_cannot_be_read_does_not_slip_past_a_stopped_run() -> None:
    """The run is stopped (`max_requests` 1, its first request done); a `response.create` the proxy cannot
    read is judged by what needs no content, as over HTTP: stopped on the socket, recorded, not sent."""
    sink = ListSink()
    guarded = socket_for(sink, limit=1)
    assert await guarded.from_client(create()) is None
    for event in answered():
        await guarded.after_client(event)
    answer = await guarded.from_client(LONE_SURROGATE)
    assert answer is not None
    (message,) = answer
    error = orjson.loads(message)
    assert (error["type"], error["status"], error["error"]["code"]) == ("error", 429, "runguard_max_requests")
    await eventually(lambda: len(records(sink)) == 2)
    stopped = records(sink)[1]
    assert stopped.blocked_by == "max_requests" and (stopped.error or "").startswith("unreadable request:")


async def test_an_unreadable_request_is_refused_when_the_proxy_is_told_to() -> None:
    sink = ListSink()
    settings = guard_settings(guard={"unreadable": "refuse"})
    guarded = ResponsesSocket(
        make_context(settings, make_guard(settings, sink=sink)),
        "k_socket",
        SPEC,
        socket,
        header_run=RUN,
        agent=None,
        tight=(),
    )
    answer = await guarded.from_client(LONE_SURROGATE)
    assert answer is not None
    error = orjson.loads(answer[0])
    assert (error["status"], error["error"]["code"]) == (400, "unreadable_request")
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert (record.status, record.blocked_by) == (400, None)
    assert (record.error or "").startswith("unreadable request:")


async def test_an_unreadable_request_goes_upstream_and_is_recorded_when_its_answer_ends() -> None:
    sink = ListSink()
    guarded = socket_for(sink)
    assert await guarded.from_client(LONE_SURROGATE) is None  # guard.unreadable: forward (fail open)
    assert records(sink) == []
    for event in answered():
        await guarded.after_client(event)
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert record.status == 200 and (record.error or "").startswith("unreadable request:")
