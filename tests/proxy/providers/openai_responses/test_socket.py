"""The Responses API's WebSocket mode as RunGuard reads it: `response.create` messages, their events' lanes and
ends, and a stopped request's answer as socket messages."""

from __future__ import annotations

import orjson

from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo
from runguard.proxy.providers.answers import StopNotice
from runguard.proxy.providers.openai_responses import socket
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter

NOTICE = StopNotice("loop_detector", "run-1", "the same call 5 times", "Reset with: runguard-proxy reset run-1")


def test_only_a_response_create_message_is_a_request() -> None:
    create = socket.create('{"type": "response.create", "model": "gpt-5", "input": "hi", "stream_id": "lane-2"}')
    assert create is not None and create.lane == "lane-2" and create.payload["model"] == "gpt-5"
    assert socket.create('{"type": "response.steer", "note": "response.create"}') is None
    assert socket.create('"response.create" but not JSON') is None
    assert socket.create('["response.create"]') is None
    assert socket.create('{"type": "session.update"}') is None


def test_a_create_that_cannot_be_read_is_told_from_messages_that_only_quote_one() -> None:
    lone = '{"type": "response.create", "input": "cut mid-emoji \\ud83d"}'
    deep = '{"type": "response.create", "input": ' + "[" * 2000 + "]" * 2000 + "}"
    assert socket.create(lone) is None and socket.unreadable_create(lone)
    assert socket.create(deep) is None and socket.unreadable_create(deep)
    # A create that reads, a message that quotes the type inside a string, and text that names none: not so.
    assert not socket.unreadable_create('{"type": "response.create", "input": "hi"}')
    assert not socket.unreadable_create('{"type": "response.steer", "input": "send \\"response.create\\" later"}')
    assert not socket.unreadable_create("not json at all")


def test_an_event_s_lane_and_the_status_a_terminal_event_ends_its_request_with() -> None:
    delta = socket.read('{"type": "response.output_text.delta", "delta": "hi"}')
    assert delta is not None and delta.lane is None and delta.ending is None
    completed = socket.read('{"type": "response.completed", "stream_id": "a", "response": {}}')
    assert completed is not None and (completed.lane, completed.ending) == ("a", 200)
    failed = socket.read('{"type": "error", "status": 429, "error": {"code": "rate_limit_exceeded"}}')
    assert failed is not None and failed.ending == 429
    bare = socket.read('{"type": "error", "error": {"code": "server_error"}}')
    assert bare is not None and bare.ending == 500
    assert socket.read("not json") is None and socket.read("[1, 2]") is None


def test_a_stopped_request_s_error_is_one_error_message_on_its_lane() -> None:
    answer = ResponsesAdapter().error_response(NOTICE, stream=True, status=429)
    (message,) = socket.messages_of(answer, "lane-1")
    said = orjson.loads(message)
    assert (said["type"], said["status"], said["stream_id"]) == ("error", 429, "lane-1")
    assert said["error"]["code"] == "runguard_loop_detector"
    (unlaned,) = socket.messages_of(answer, None)
    assert "stream_id" not in orjson.loads(unlaned)


def test_a_stop_completion_is_its_stream_s_events_on_its_lane_ending_with_a_completed_response() -> None:
    request = RequestInfo(Api.RESPONSES, "gpt-5", True, AgentIdentity(None, "f"))
    answer = ResponsesAdapter().stop_response(NOTICE, request)
    assert answer is not None and answer.status == 200
    events = [orjson.loads(m) for m in socket.messages_of(answer, "lane-3")]
    assert len(events) > 1 and all(e["stream_id"] == "lane-3" for e in events)
    assert events[-1]["type"] == "response.completed"
    assert "the same call 5 times" in orjson.dumps(events).decode()
