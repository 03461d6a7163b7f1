"""OpenAI's synthetic answers, read back by the openai SDK's own types."""

from __future__ import annotations

import orjson
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from runguard.proxy.providers.base import StopNotice
from runguard.proxy.providers.common import openai_replies
from runguard.proxy.providers.common.sse import SseSplitter

NOTICE = StopNotice("loop", "run-1", "tool 'a' repeated", "Reset with: runguard-proxy reset run-1")


def _events(body: bytes) -> list[bytes]:
    splitter = SseSplitter()
    return [event.data for event in splitter.feed(body)] + [event.data for event in splitter.rest()]


def test_the_error_is_one_the_sdk_does_not_retry_and_names_the_detector() -> None:
    reply = openai_replies.error_response(NOTICE, 429)
    assert reply.status == 429 and reply.headers["x-should-retry"] == "false"
    error = orjson.loads(reply.body)["error"]
    assert error == {"message": NOTICE.message, "type": "runguard_stopped", "param": None, "code": "runguard_loop"}


def test_a_chat_stop_is_a_valid_completion() -> None:
    reply = openai_replies.chat_stop(NOTICE, "gpt-4o", "stopped", stream=False, include_usage=False)
    completion = ChatCompletion.model_validate(orjson.loads(reply.body))
    assert completion.choices[0].message.content == "stopped"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.id.startswith("chatcmpl-runguard")


def test_a_streamed_chat_stop_ends_with_done_and_has_usage_only_when_asked() -> None:
    for include_usage in (False, True):
        reply = openai_replies.chat_stop(NOTICE, "gpt-4o", "stopped", stream=True, include_usage=include_usage)
        events = _events(reply.body)
        assert events[-1] == b"[DONE]"
        chunks = [ChatCompletionChunk.model_validate(orjson.loads(data)) for data in events[:-1]]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "stopped"
        assert (chunks[-1].usage is not None) is include_usage


def test_a_responses_stop_is_a_valid_response_whole_or_streamed() -> None:
    whole = openai_replies.responses_stop(NOTICE, "gpt-4o", "stopped", stream=False)
    response = Response.model_validate(orjson.loads(whole.body))
    assert response.output_text == "stopped" and response.status == "completed"
    streamed = openai_replies.responses_stop(NOTICE, "gpt-4o", "stopped", stream=True)
    events = [orjson.loads(data) for data in _events(streamed.body)]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    assert Response.model_validate(events[-1]["response"]).output_text == "stopped"


def test_stream_errors_carry_a_top_level_error_the_sdk_raises() -> None:
    chat = orjson.loads(_events(openai_replies.stream_error_event("gone", "upstream_timeout"))[0])
    assert chat["error"]["code"] == "upstream_timeout" and chat["error"]["message"] == "gone"
    responses = openai_replies.responses_stream_error("gone", "upstream_timeout")
    assert responses.startswith(b"event: error\n")
    event = orjson.loads(_events(responses)[0])
    assert (event["type"], event["code"], event["error"]["message"]) == ("error", "upstream_timeout", "gone")


def test_synthetic_ids_differ_each_time() -> None:
    assert openai_replies.synthetic_id("resp_", NOTICE) != openai_replies.synthetic_id("resp_", NOTICE)
