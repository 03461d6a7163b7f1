"""Gemini's synthetic answers, read back by google-genai's own types."""

from __future__ import annotations

import orjson
import pytest
from google.genai import types

from runguard.proxy.providers.base import StopNotice
from runguard.proxy.providers.gemini import replies

NOTICE = StopNotice("loop", "run-1", "tool 'a' repeated", "Reset with: runguard-proxy reset run-1")


@pytest.mark.parametrize(("status", "name"), [(429, "RESOURCE_EXHAUSTED"), (400, "FAILED_PRECONDITION")])
def test_the_error_names_its_status_and_the_detector(status: int, name: str) -> None:
    reply = replies.error_response(NOTICE, status)
    assert reply.status == status
    error = orjson.loads(reply.body)["error"]
    assert (error["code"], error["status"], error["message"]) == (status, name, NOTICE.message)
    assert error["details"][0]["reason"] == "RUNGUARD_LOOP"
    assert error["details"][0]["metadata"] == {"detector": "loop", "run_id": "run-1"}


def test_a_stop_is_a_valid_response_whole_sse_or_json_array() -> None:
    whole = replies.stop_response("gemini-2.5-flash", "stopped", stream=False)
    assert types.GenerateContentResponse.model_validate(orjson.loads(whole.body)).text == "stopped"
    sse = replies.stop_response("gemini-2.5-flash", "stopped", stream=True)
    assert sse.headers["Content-Type"] == "text/event-stream" and sse.body.startswith(b"data: ")
    assert types.GenerateContentResponse.model_validate(orjson.loads(sse.body[6:])).text == "stopped"
    array = replies.stop_response("gemini-2.5-flash", "stopped", stream=True, json_array=True)
    (item,) = orjson.loads(array.body)
    assert types.GenerateContentResponse.model_validate(item).text == "stopped"


def test_a_mid_stream_error_has_error_as_its_first_key() -> None:
    element = replies.stream_error_element("gone", "upstream_timeout")
    assert element.startswith(b'{"error":')
    assert orjson.loads(element)["error"] == {
        "code": 502,
        "message": "gone (upstream_timeout)",
        "status": "UNAVAILABLE",
    }
    assert replies.stream_error_event("gone", "upstream_timeout") == b"data: " + element + b"\r\n\r\n"
