"""The errors the proxy answers itself, shaped as the provider's own so SDKs raise their usual exceptions."""

from __future__ import annotations

import orjson

from runguard.proxy.core.errors import UpstreamError, UpstreamTimeout
from runguard.proxy.core.events import Provider
from runguard.proxy.relay.replies import error_body, provider_error, upstream_failed


def test_an_openai_error_has_openai_s_fields_and_runguard_s_code() -> None:
    body = orjson.loads(error_body(Provider.OPENAI, 413, "too large", "request_too_large"))
    assert body == {
        "error": {"message": "too large", "type": "runguard_proxy_error", "param": None, "code": "request_too_large"}
    }
    assert orjson.loads(error_body(None, 404, "no route", "unknown_path"))["error"]["code"] == "unknown_path"


def test_a_gemini_error_has_gemini_s_status_names() -> None:
    body = orjson.loads(error_body(Provider.GEMINI, 429, "slow down", "x"))
    assert body == {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
    assert orjson.loads(error_body(Provider.GEMINI, 418, "odd", "x"))["error"]["status"] == "UNKNOWN"


def test_a_provider_error_is_json_with_its_status_and_headers() -> None:
    reply = provider_error(Provider.OPENAI, 503, "stopping", "shutting_down", headers={"Retry-After": "1"})
    assert reply.status == 503 and reply.content_type == "application/json" and reply.headers["Retry-After"] == "1"


def test_an_upstream_that_times_out_is_a_504_and_one_that_cannot_be_reached_a_502() -> None:
    late = upstream_failed(Provider.OPENAI, UpstreamTimeout("no answer in 60 s"))
    down = upstream_failed(Provider.GEMINI, UpstreamError("connection refused"))
    assert (late.status, down.status) == (504, 502)
    assert late.body is not None and b"upstream_timeout" in late.body  # type: ignore[operator]
    assert down.body is not None and b"UNAVAILABLE" in down.body  # type: ignore[operator]
