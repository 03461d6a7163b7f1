"""The Realtime API's events as RunGuard reads them: responses begun and done, function outputs, its answer."""

from __future__ import annotations

import orjson

from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo
from runguard.proxy.providers.base import StopNotice
from runguard.proxy.providers.openai_realtime.events import (
    RealtimeAnswers,
    function_output,
    response_event,
    response_info,
)


def test_a_done_response_s_calls_text_and_usage_are_read() -> None:
    info = response_info(
        {
            "id": "resp_1",
            "status": "completed",
            "output": [
                {"type": "message", "content": [{"type": "output_audio", "transcript": "hello"}, {"text": "hi"}]},
                {"type": "function_call", "name": "lookup", "call_id": "c1", "arguments": '{"id": 4}'},
                "not an item",
            ],
            "usage": {
                "input_tokens": 90,
                "output_tokens": 40,
                "input_token_details": {
                    "audio_tokens": 60,
                    "cached_tokens": 10,
                    "cached_tokens_details": {"text_tokens": 4, "audio_tokens": 6},
                },
                "output_token_details": {"audio_tokens": 30},
            },
        }
    )
    assert (info.response_id, info.text, info.complete, info.error) == ("resp_1", "hi", True, None)
    assert [(c.name, c.arguments, c.call_id) for c in info.tool_calls] == [("lookup", '{"id": 4}', "c1")]
    assert info.usage is not None
    assert (info.usage.input_tokens, info.usage.cached_tokens, info.usage.audio_input_tokens) == (90, 10, 60)
    assert (info.usage.output_tokens, info.usage.audio_output_tokens) == (40, 30)
    assert info.usage.cached_audio_tokens == 6


def test_a_failed_response_is_an_error_and_a_cancelled_one_an_interruption() -> None:
    failed = response_info({"status": "failed", "status_details": {"error": {"message": "server_error"}}})
    assert (failed.error, failed.complete) == ("server_error", False)
    cancelled = response_info({"status": "cancelled", "status_details": {"reason": "turn_detected"}})
    assert (cancelled.error, cancelled.complete, cancelled.finish_reason) == (None, False, "cancelled")
    assert response_info({"status": "failed"}).error == "response failed"


def test_a_function_call_output_is_read_from_a_client_event_and_other_events_are_not() -> None:
    item = {"type": "function_call_output", "call_id": "c1", "output": '{"temp": 21}'}
    output = function_output(orjson.dumps({"type": "conversation.item.create", "item": item}).decode())
    assert output is not None and (output.call_id, output.output) == ("c1", '{"temp": 21}')
    message = {"type": "conversation.item.create", "item": {"type": "message", "role": "user"}}
    assert function_output(orjson.dumps(message).decode()) is None
    assert function_output('{"type": "input_audio_buffer.append", "audio": "AAAA"}') is None
    assert function_output('"function_call_output" but not JSON') is None
    assert function_output('["function_call_output"]') is None


def test_responses_begun_and_done_are_read_from_server_events_and_nothing_else_is() -> None:
    begun = response_event('{"type": "response.created", "response": {"id": "resp_9", "status": "in_progress"}}')
    assert begun is not None and (begun.done, begun.response_id) == (False, "resp_9")
    done = response_event('{"type": "response.done", "response": {"id": "resp_9", "status": "completed"}}')
    assert done is not None and done.done and done.response["status"] == "completed"
    assert response_event('{"type": "response.audio.delta", "delta": "AAAA"}') is None
    assert response_event('{"type": "session.updated", "note": "response.done"}') is None
    assert response_event('"response.created" but not JSON') is None
    assert response_event('["response.done"]') is None


def test_a_stopped_session_is_answered_with_an_error_event_naming_runguard_s_code_and_no_stop_turn() -> None:
    notice = StopNotice("max_requests", "run-1", "run reached 20 requests", "Reset with: runguard-proxy reset run-1")
    answer = RealtimeAnswers().error_response(notice, stream=True)
    event = orjson.loads(answer.body)
    assert (answer.status, event["type"], event["error"]["type"]) == (429, "error", "runguard_stopped")
    assert event["error"]["code"] == "runguard_max_requests" and "20 requests" in event["error"]["message"]
    request = RequestInfo(Api.REALTIME, "gpt-realtime", True, AgentIdentity(None, "f"))
    assert RealtimeAnswers().stop_response(notice, request) is None
