"""Every synthetic response, parsed by the real SDKs (no network: the SDKs' own httpx transport is mocked).

For each API (Chat, Responses, Gemini), streamed and not, the adapter's
`error_response`, `stop_response` and `stream_error_event` bytes are handed to
openai-python (strict response validation) and google-genai exactly as the
proxy would send them. The request the SDK really sent is parsed by the
adapter first, so a stop for a request that demands a JSON schema is built
from that request's own schema and must parse back into the caller's model.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from pydantic import BaseModel, Field

from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.common.openai_replies import chat_stop, responses_stop
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter

NOTICE = StopNotice(
    "non_progress",
    "run-42",
    "tool 'parse_document' returned the same result 3 times",
    "Reset with: runguard-proxy reset run-42",
)
MESSAGE = NOTICE.summary  # what a stop completion says: the model reads it, so no reset command
MESSAGES: Any = [{"role": "user", "content": "Extract the invoice total."}]
GEMINI_MODEL = "gemini-2.5-flash"


def names_the_trip(text: str) -> bool:
    return all(part in text for part in ("non_progress", "run-42", "3 times", "runguard-proxy reset run-42"))


def names_the_stop(text: str) -> bool:
    """A stop completion's text names what stopped and why, and tells the model no command."""
    return all(part in text for part in ("non_progress", "run-42", "3 times")) and "runguard-proxy" not in text


class Finding(BaseModel):
    label: Literal["ok", "stopped"]
    score: int = Field(ge=1, le=5)


class Report(BaseModel):
    """An agent's output type: nested model ($defs/$ref), list with minItems, enum, bounds, optional."""

    message: str
    findings: list[Finding] = Field(min_length=1)
    note: str | None
    checked_at: datetime.datetime


# -- a fake provider inside the SDK's transport ----------------------------------------------------


class Wire:
    """Answers each request the SDK sends with `answer(request)`; keeps every request."""

    def __init__(self, answer: Callable[[httpx.Request], Synthetic | httpx.Response]) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        got = self.answer(request)
        if isinstance(got, httpx.Response):
            return got
        return httpx.Response(got.status, headers=dict(got.headers), content=got.body)

    def openai(self, **kwargs: Any) -> openai.OpenAI:
        return openai.OpenAI(
            base_url="http://provider.test/v1",
            api_key="sk-test",
            http_client=httpx.Client(transport=httpx.MockTransport(self._handle)),
            _strict_response_validation=True,
            **kwargs,  # default max_retries=2: an error must still cost exactly one request
        )

    def gemini(self, retry: types.HttpRetryOptions | None = None) -> genai.Client:
        options = types.HttpOptions(
            base_url="http://provider.test",
            httpx_client=httpx.Client(transport=httpx.MockTransport(self._handle)),
            retry_options=retry,
        )
        return genai.Client(api_key="test-key", http_options=options)


def context_of(request: httpx.Request) -> RequestContext:
    """What the proxy's route gives the Gemini adapter: the model and method from the path."""
    path = request.url.path
    if ":" not in path:
        return RequestContext()
    model, method = path.rsplit("/", 1)[-1].split(":", 1)
    return RequestContext(path_model=model, stream_hint=method == "streamGenerateContent")


def stop_of(adapter: Adapter) -> Callable[[httpx.Request], Synthetic]:
    def answer(request: httpx.Request) -> Synthetic:
        info = adapter.parse_request(request.content, context_of(request))
        assert info.parse_error is None
        stop = adapter.stop_response(NOTICE, info)
        assert stop is not None
        assert stop.status == 200
        return stop

    return answer


def error_of(adapter: Adapter, status: int = 429) -> Callable[[httpx.Request], Synthetic]:
    def answer(request: httpx.Request) -> Synthetic:
        info = adapter.parse_request(request.content, context_of(request))
        return adapter.error_response(NOTICE, stream=info.stream, status=status)

    return answer


def broken_after(prefix: bytes, tail: bytes) -> Callable[[httpx.Request], httpx.Response]:
    """A stream that began normally and ends with the proxy's mid-stream error bytes."""
    return lambda _: httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=prefix + tail)


def drain(items: Iterable[Any], each: Callable[[Any], None]) -> None:
    for item in items:
        each(item)


def _chat(client: openai.OpenAI, stream: bool) -> Any:
    if stream:
        return list(client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True))
    return client.chat.completions.create(model="gpt-4o", messages=MESSAGES)


def _responses(client: openai.OpenAI, stream: bool) -> Any:
    if stream:
        with client.responses.stream(model="gpt-4o", input="hi") as events:
            return events.get_final_response()
    return client.responses.create(model="gpt-4o", input="hi")


# -- OpenAI Chat Completions -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_chat_error_raises_rate_limit_error_after_one_request(stream: bool) -> None:
    wire = Wire(error_of(ChatAdapter()))
    with pytest.raises(openai.RateLimitError) as caught:
        _chat(wire.openai(), stream)
    assert len(wire.requests) == 1  # x-should-retry: false beats the 2 default retries
    error = caught.value
    assert error.status_code == 429
    assert error.code == "runguard_non_progress"
    assert error.response.headers["x-should-retry"] == "false"
    assert names_the_trip(error.message)


def test_chat_stop_is_a_completion_that_ends_the_turn() -> None:
    wire = Wire(stop_of(ChatAdapter()))
    completion = wire.openai().chat.completions.create(model="gpt-4o", messages=MESSAGES)
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert choice.message.content == MESSAGE and names_the_stop(MESSAGE)
    assert completion.model == "gpt-4o"
    assert completion.usage is not None


@pytest.mark.parametrize("include_usage", [False, True])
def test_chat_stop_streamed(include_usage: bool) -> None:
    wire = Wire(stop_of(ChatAdapter()))
    options: Any = {"include_usage": True} if include_usage else openai.omit
    chunks = list(
        wire.openai().chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True, stream_options=options)
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == MESSAGE
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert (chunks[-1].usage is not None) is include_usage


def test_chat_stop_through_the_stream_helper() -> None:
    wire = Wire(stop_of(ChatAdapter()))
    with wire.openai().chat.completions.stream(model="gpt-4o", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == MESSAGE


def test_chat_stop_for_a_json_schema_request_parses_into_the_model() -> None:
    wire = Wire(stop_of(ChatAdapter()))
    completion = wire.openai().chat.completions.parse(model="gpt-4o", messages=MESSAGES, response_format=Report)
    parsed = completion.choices[0].message.parsed
    assert isinstance(parsed, Report)
    assert parsed.message == MESSAGE and len(parsed.findings) == 1


def test_chat_stop_streamed_for_a_json_schema_request_parses_into_the_model() -> None:
    wire = Wire(stop_of(ChatAdapter()))
    with wire.openai().chat.completions.stream(model="gpt-4o", messages=MESSAGES, response_format=Report) as stream:
        parsed = stream.get_final_completion().choices[0].message.parsed
    assert isinstance(parsed, Report) and parsed.message == MESSAGE


def test_chat_stop_for_json_object_mode_is_a_json_object() -> None:
    wire = Wire(stop_of(ChatAdapter()))
    completion = wire.openai().chat.completions.create(
        model="gpt-4o", messages=MESSAGES, response_format={"type": "json_object"}
    )
    assert json.loads(completion.choices[0].message.content or "") == {"message": MESSAGE}


def test_chat_mid_stream_error_raises_api_error() -> None:
    began = chat_stop(NOTICE, "gpt-4o", "partial answer", stream=True, include_usage=False).body
    first_chunk = began[: began.index(b"\n\n") + 2]
    wire = Wire(
        broken_after(first_chunk, ChatAdapter().stream_error_event("upstream broke mid-stream", "upstream_error"))
    )
    seen: list[str] = []
    chunks = wire.openai().chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError) as caught:
        drain(chunks, lambda chunk: seen.append(chunk.choices[0].delta.content or ""))
    assert not isinstance(caught.value, openai.APIStatusError)
    assert caught.value.message == "upstream broke mid-stream"
    assert caught.value.code == "upstream_error"
    assert seen == ["partial answer"]
    assert len(wire.requests) == 1


# -- OpenAI Responses ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_responses_error_raises_rate_limit_error_after_one_request(stream: bool) -> None:
    wire = Wire(error_of(ResponsesAdapter()))
    with pytest.raises(openai.RateLimitError) as caught:
        _responses(wire.openai(), stream)
    assert len(wire.requests) == 1
    assert caught.value.code == "runguard_non_progress"
    assert names_the_trip(caught.value.message)


def test_responses_stop_is_a_completed_response() -> None:
    wire = Wire(stop_of(ResponsesAdapter()))
    response = wire.openai().responses.create(model="gpt-4o", input="hi")
    assert response.status == "completed"
    assert response.output_text == MESSAGE
    assert response.usage is not None
    assert not [item for item in response.output if item.type == "function_call"]


def test_responses_stop_streamed_ends_with_response_completed() -> None:
    wire = Wire(stop_of(ResponsesAdapter()))
    events = list(wire.openai().responses.create(model="gpt-4o", input="hi", stream=True))
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == MESSAGE


def test_responses_stop_through_the_stream_helper() -> None:
    wire = Wire(stop_of(ResponsesAdapter()))
    with wire.openai().responses.stream(model="gpt-4o", input="hi") as stream:
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text == MESSAGE


def test_responses_stop_for_a_text_format_request_parses_into_the_model() -> None:
    wire = Wire(stop_of(ResponsesAdapter()))
    response = wire.openai().responses.parse(model="gpt-4o", input="hi", text_format=Report)
    assert isinstance(response.output_parsed, Report)
    assert response.output_parsed.message == MESSAGE
    sent = json.loads(wire.requests[0].content)
    assert sent["text"]["format"]["type"] == "json_schema"  # the schema really came from the request


def test_responses_stop_streamed_for_a_text_format_request_parses_into_the_model() -> None:
    wire = Wire(stop_of(ResponsesAdapter()))
    with wire.openai().responses.stream(model="gpt-4o", input="hi", text_format=Report) as stream:
        final = stream.get_final_response()
    assert isinstance(final.output_parsed, Report) and final.output_parsed.message == MESSAGE


def _responses_began() -> bytes:
    body = responses_stop(NOTICE, "gpt-4o", "partial", stream=True).body
    return body[: body.index(b"event: response.output_text.done")]


def test_responses_mid_stream_error_raises_api_error() -> None:
    tail = ResponsesAdapter().stream_error_event("upstream broke mid-stream", "upstream_error")
    wire = Wire(broken_after(_responses_began(), tail))
    seen: list[str] = []
    events = wire.openai().responses.create(model="gpt-4o", input="hi", stream=True)
    with pytest.raises(openai.APIError) as caught:
        drain(events, lambda event: seen.append(event.type))
    assert not isinstance(caught.value, openai.APIStatusError)
    assert caught.value.message == "upstream broke mid-stream" and caught.value.code == "upstream_error"
    assert seen[-1] == "response.output_text.delta"


def test_responses_mid_stream_error_through_the_stream_helper() -> None:
    tail = ResponsesAdapter().stream_error_event("upstream broke mid-stream", "upstream_error")
    wire = Wire(broken_after(_responses_began(), tail))
    with pytest.raises(openai.APIError), wire.openai().responses.stream(model="gpt-4o", input="hi") as stream:
        stream.get_final_response()


# -- Gemini (google-genai) ------------------------------------------------------------------------


def _gemini_call(client: genai.Client, stream: bool, config: types.GenerateContentConfig | None = None) -> Any:
    if stream:
        return list(client.models.generate_content_stream(model=GEMINI_MODEL, contents="hi", config=config))
    return client.models.generate_content(model=GEMINI_MODEL, contents="hi", config=config)


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_error_is_resource_exhausted_after_one_request(stream: bool) -> None:
    wire = Wire(error_of(GeminiAdapter()))
    with pytest.raises(genai_errors.ClientError) as caught:
        _gemini_call(wire.gemini(), stream)
    assert len(wire.requests) == 1  # google-genai does not retry by default
    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert names_the_trip(caught.value.message or "")


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_failed_precondition_stops_a_client_with_retries_on_after_one_request(stream: bool) -> None:
    wire = Wire(error_of(GeminiAdapter(), status=400))
    with pytest.raises(genai_errors.ClientError) as caught:
        _gemini_call(wire.gemini(retry=types.HttpRetryOptions()), stream)  # 5 attempts on 429
    assert len(wire.requests) == 1
    assert (caught.value.code, caught.value.status) == (400, "FAILED_PRECONDITION")
    assert names_the_trip(caught.value.message or "")


def test_gemini_429_is_retried_by_a_client_with_retries_on() -> None:
    """Why `guard.gemini_error_status: 400` exists: with HttpRetryOptions the 429 is sent again."""
    wire = Wire(error_of(GeminiAdapter()))
    retry = types.HttpRetryOptions(attempts=3, initial_delay=0.001, max_delay=0.001, jitter=0)
    with pytest.raises(genai_errors.ClientError):
        _gemini_call(wire.gemini(retry=retry), False)
    assert len(wire.requests) == 3


def test_gemini_stop_is_a_normal_answer() -> None:
    wire = Wire(stop_of(GeminiAdapter()))
    response = _gemini_call(wire.gemini(), False)
    assert response.text == MESSAGE
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert not response.function_calls
    assert response.usage_metadata is not None and response.usage_metadata.total_token_count == 0


def test_gemini_stop_streamed() -> None:
    wire = Wire(stop_of(GeminiAdapter()))
    chunks = _gemini_call(wire.gemini(), True)
    assert "".join(c.text or "" for c in chunks) == MESSAGE
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert wire.requests[0].url.params["alt"] == "sse"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "config",
    [
        {"response_schema": Report},  # sent as responseSchema, OpenAPI subset, snake_case keys
        {"response_json_schema": Report.model_json_schema()},  # plain JSON Schema with $defs
        {"response_schema": Report.model_json_schema()},  # converted by the SDK
    ],
    ids=["responseSchema-model", "responseJsonSchema", "responseSchema-dict"],
)
def test_gemini_stop_for_a_schema_request_parses_into_the_model(config: dict[str, Any], stream: bool) -> None:
    wire = Wire(stop_of(GeminiAdapter()))
    got = _gemini_call(
        wire.gemini(), stream, types.GenerateContentConfig(response_mime_type="application/json", **config)
    )
    text = "".join(c.text or "" for c in got) if stream else got.text
    report = Report.model_validate_json(text)
    assert report.message == MESSAGE and len(report.findings) == 1
    if not stream and config.get("response_schema") is Report:
        assert isinstance(got.parsed, Report)


REPORT_OPENAPI: dict[str, Any] = {  # Report as an OpenAPI-subset Schema (FunctionDeclaration.parameters)
    "type": "OBJECT",
    "properties": {
        "message": {"type": "STRING"},
        "findings": {
            "type": "ARRAY",
            "min_items": 1,
            "items": {
                "type": "OBJECT",
                "properties": {
                    "label": {"type": "STRING", "enum": ["ok", "stopped"]},
                    "score": {"type": "INTEGER", "minimum": 1, "maximum": 5},
                },
                "required": ["label", "score"],
            },
        },
        "note": {"type": "STRING", "nullable": True},
        "checked_at": {"type": "STRING", "format": "date-time"},
    },
    "required": ["message", "findings", "note", "checked_at"],
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "parameters",
    [{"parameters_json_schema": Report.model_json_schema()}, {"parameters": REPORT_OPENAPI}],
    ids=["parameters_json_schema", "parameters"],
)
def test_gemini_stop_for_adks_set_model_response_tool_parses_into_the_model(
    parameters: dict[str, Any], stream: bool
) -> None:
    """ADK with an output schema and tools: the schema comes as a `set_model_response` tool, not responseSchema."""
    wire = Wire(stop_of(GeminiAdapter()))
    declarations = [
        types.FunctionDeclaration(name="lookup", description="Look something up."),
        types.FunctionDeclaration(name="set_model_response", description="Set your final response.", **parameters),
    ]
    got = _gemini_call(
        wire.gemini(), stream, types.GenerateContentConfig(tools=[types.Tool(function_declarations=declarations)])
    )
    text = "".join(c.text or "" for c in got) if stream else got.text
    report = Report.model_validate_json(text)
    assert report.message == MESSAGE and len(report.findings) == 1


def test_gemini_set_model_response_is_no_schema_next_to_a_response_schema_or_under_another_name() -> None:
    def schema_of(body: dict[str, Any]) -> Any:
        return GeminiAdapter().parse_request(json.dumps(body).encode(), RequestContext(path_model="m")).output_schema

    tool = {"functionDeclarations": [{"name": "set_model_response", "parametersJsonSchema": {"type": "object"}}]}
    response_schema = {"responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}}}
    assert schema_of({"contents": [], "tools": [tool]}).name == "set_model_response"
    assert schema_of({"contents": [], "tools": [tool], "generationConfig": response_schema}).dialect == "openapi"
    renamed = {"functionDeclarations": [{"name": "set_response", "parametersJsonSchema": {"type": "object"}}]}
    assert schema_of({"contents": [], "tools": [renamed]}) is None


def test_gemini_stop_for_json_mime_type_only_is_a_json_object() -> None:
    wire = Wire(stop_of(GeminiAdapter()))
    response = _gemini_call(wire.gemini(), False, types.GenerateContentConfig(response_mime_type="application/json"))
    assert json.loads(response.text) == {"message": MESSAGE}


def test_gemini_mid_stream_error_raises_api_error() -> None:
    began = GeminiAdapter().stop_response(
        NOTICE, GeminiAdapter().parse_request(b'{"contents":[]}', RequestContext(path_model="m", stream_hint=True))
    )
    assert began is not None
    tail = GeminiAdapter().stream_error_event("upstream broke mid-stream", "upstream_error")
    assert tail.startswith(b'data: {"error":')  # google-genai only raises when `error` is the first key
    wire = Wire(broken_after(began.body, tail))
    seen: list[str] = []
    chunks = wire.gemini().models.generate_content_stream(model=GEMINI_MODEL, contents="hi")
    with pytest.raises(genai_errors.APIError) as caught:
        drain(chunks, lambda chunk: seen.append(chunk.text or ""))
    assert "upstream broke mid-stream" in (caught.value.message or "")
    assert seen == [MESSAGE]
    assert len(wire.requests) == 1


# -- shapes the SDKs do not check but the wire format fixes -------------------------------------------


def test_every_synthetic_names_the_detector_run_and_figure() -> None:
    bodies: Iterator[bytes] = (
        s.body
        for adapter in (ChatAdapter(), ResponsesAdapter(), GeminiAdapter())
        for s in (adapter.error_response(NOTICE, stream=False), adapter.error_response(NOTICE, stream=True))
    )
    for body in bodies:
        assert names_the_trip(body.decode())


def test_gemini_stop_uses_camel_case_and_status_200() -> None:
    info = GeminiAdapter().parse_request(b'{"contents":[]}', RequestContext(path_model="gemini-2.5-flash"))
    stop = GeminiAdapter().stop_response(NOTICE, info)
    assert stop is not None and stop.status == 200
    body = json.loads(stop.body)
    assert "finishReason" in body["candidates"][0] and "usageMetadata" in body
    assert "finish_reason" not in stop.body.decode() and "usage_metadata" not in stop.body.decode()


def test_stop_falls_back_to_none_when_no_instance_fits_the_schema() -> None:
    body = {
        "model": "gpt-4o",
        "messages": MESSAGES,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^[0-9]{4}$"}},
        },
    }
    info = ChatAdapter().parse_request(json.dumps(body).encode(), RequestContext())
    assert ChatAdapter().stop_response(NOTICE, info) is None  # the guard answers with the error instead
