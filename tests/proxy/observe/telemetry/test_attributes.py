"""The attributes of a request's spans in the GenAI conventions' names: the operation per API, the trip
event, the opt-in content in the conventions' message shapes, and `error.type` as a tracing tool groups
failures (blocked by RunGuard, a failure's code, or the status the client got), seen on real traffic."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo, ResponseInfo, ToolCall, ToolResult
from runguard.proxy.observe.telemetry import attributes
from runguard.proxy.store.records import TripRecord
from tests.e2e import payloads
from tests.support.otel import by_start, telemetry
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.upstream import FakeUpstream, Reply


def _request(**fields: Any) -> RequestInfo:
    return RequestInfo(
        api=Api.CHAT, model="gpt-4o-mini", stream=False, agent=AgentIdentity("planner", "f" * 16), **fields
    )


@pytest.mark.parametrize(
    ("api", "name"),
    [(Api.CHAT, "chat"), (Api.RESPONSES, "chat"), (Api.GEMINI, "generate_content")],
)
def test_the_operation_is_named_per_api(api: Api, name: str) -> None:
    assert attributes.operation(api) == name


def test_a_trip_event_names_the_detector_and_what_it_would_have_saved() -> None:
    trip = TripRecord("run", "k_1", "spiral", "block", "same call 3 times", "run", 4, 0.0, 0.2, 900, 1.75)
    assert attributes.trip_event(trip) == {
        "runguard.detector": "spiral",
        "runguard.action": "block",
        "runguard.reason": "same call 3 times",
        "runguard.scope": "run",
        "runguard.cost.avoided_usd": 1.75,
    }


def test_input_content_is_the_request_s_new_tool_results_only() -> None:
    assert attributes.input_content(_request()) == {}
    results = (ToolResult("search", "call_1", '{"hits": 3}'), ToolResult(None, None, "plain"))
    (value,) = attributes.input_content(_request(new_results=results)).values()
    assert json.loads(str(value)) == [
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "call_1", "response": '{"hits": 3}'},
                {"type": "tool_call_response", "id": None, "response": "plain"},
            ],
        }
    ]


def test_output_content_is_the_response_s_text_and_calls_as_one_assistant_message() -> None:
    assert attributes.output_content(ResponseInfo()) == {}
    response = ResponseInfo(
        text="Looking.", tool_calls=(ToolCall("search", '{"q": "x"}', "call_2"),), finish_reason="tool_calls"
    )
    (value,) = attributes.output_content(response).values()
    assert json.loads(str(value)) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Looking."},
                {"type": "tool_call", "id": "call_2", "name": "search", "arguments": '{"q": "x"}'},
            ],
            "finish_reason": "tool_calls",
        }
    ]


async def test_error_type_is_the_status_the_failure_s_code_or_nothing(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    answers = iter(
        [
            Reply.json(
                {"error": {"message": "The server is overloaded, try again.", "type": "server_error"}}, status=503
            ),
            Reply.json(payloads.chat_completion("ok")),
        ]
    )
    upstream.script = lambda _: next(answers)
    url = await make_proxy(**telemetry(receiver.http_url))
    client = sdk_client(url, "sk-otel-errors", {"X-Run-Id": "otel-errors"})
    ask: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(**ask)
    await client.chat.completions.create(**ask)
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 2)
    failed, ok = by_start(receiver.named("chat "))
    assert failed.attributes["error.type"] == "503" and failed.status == "ERROR"
    assert failed.attributes["http.response.status_code"] == 503
    assert "error.type" not in ok.attributes and ok.status == "UNSET"
    assert ok.attributes["gen_ai.agent.name"] and ok.attributes["runguard.key_hash"].startswith("k_")


async def test_a_model_with_no_price_has_no_cost_attribute_but_says_it_is_unpriced(
    receiver: OtlpReceiver, upstream: FakeUpstream, make_proxy: Callable[..., Any], sdk_client: Any
) -> None:
    answers = iter(
        [Reply.json(payloads.chat_completion("ok", model="acme-coder-9")), Reply.json(payloads.chat_completion("ok"))]
    )
    upstream.script = lambda _: next(answers)
    url = await make_proxy(**telemetry(receiver.http_url))
    client = sdk_client(url, "sk-otel-unpriced", {"X-Run-Id": "otel-unpriced"})
    for model in ("acme-coder-9", "gpt-4o-mini"):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    await receiver.wait_for(lambda r: len(r.named("chat ")) == 2)
    unknown, known = by_start(receiver.named("chat "))
    assert unknown.attributes["gen_ai.request.model"] == "acme-coder-9"
    assert unknown.attributes["runguard.cost.unpriced"] is True and "runguard.cost.usd" not in unknown.attributes
    assert known.attributes["runguard.cost.usd"] > 0 and "runguard.cost.unpriced" not in known.attributes
