"""The Realtime API's events, as RunGuard reads them (no I/O): responses begun and done, function outputs.

A Realtime session is one WebSocket. Its responses start on the server (voice
activity detection ends a user's turn) or on a client's `response.create`; the
server announces each with `response.created` and ends it with
`response.done`, whose `usage` bills its input and output, the audio apart.
The outputs the client sends for a response's function calls
(`conversation.item.create` with a `function_call_output`) are the tool
results of the next response. Every other event, and one that cannot be read,
is none of these (None).

The OpenAI provider's sessions (`providers.sockets.Sessions`, which this module satisfies; `registry.SESSIONS`).
A stopped session is told why with an `error` event naming RunGuard's code
(`RealtimeAnswers`): a session cannot be given a made-up turn to end on.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import orjson

from runguard.proxy.core.events import Api, Provider, RequestInfo, ResponseInfo, ToolCall, Usage
from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.common.jsonish import as_dict, as_int, as_list, as_str, opt_str
from runguard.proxy.providers.common.openai_replies import error_code
from runguard.proxy.providers.openai import provider as openai
from runguard.proxy.providers.openai_responses import socket  # `read`: a socket message as an object
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter

_STARTED, _DONE, _OUTPUT = '"response.created"', '"response.done"', '"function_call_output"'


def provider() -> Provider:
    return openai.OPENAI.name


def api() -> Api:
    return Api.REALTIME


def serves(path: str) -> bool:
    """A Realtime session's path: `/v1/realtime?model=...`, Azure's `/openai/realtime?deployment=...`."""
    return path.rstrip("/").endswith("/realtime")


def model(query: Mapping[str, str]) -> str:
    """The model the handshake names (Azure's deployment); "realtime" when it names none."""
    return query.get("model") or query.get("deployment") or "realtime"


def encoding(model: str) -> str | None:
    """OpenAI's encoding of the model (as its HTTP APIs count it)."""
    return openai.encoding(model)


def answers() -> RealtimeAnswers:
    return RealtimeAnswers()


@frozen
class FunctionOutput:
    """A client's `function_call_output` item: the result of a response's function call."""

    call_id: str | None
    output: str


@frozen
class ResponseEvent:
    """A server's `response.created` (`done` False) or `response.done` (`done` True) event."""

    done: bool
    response_id: str | None
    response: dict[str, Any]


def function_output(text: str) -> FunctionOutput | None:
    """The function output a client event carries, if it is one (read only if its text names one)."""
    event = socket.read(text) if _OUTPUT in text else None
    if event is None:
        return None
    item = as_dict(event.payload.get("item"))
    if item.get("type") != "function_call_output":
        return None
    return FunctionOutput(opt_str(item.get("call_id")), as_str(item.get("output")))


def response_event(text: str) -> ResponseEvent | None:
    """The response a server event begins or ends, if it is one (read only if its text names one)."""
    event = socket.read(text) if _STARTED in text or _DONE in text else None
    if event is None:
        return None
    kind, response = event.payload.get("type"), as_dict(event.payload.get("response"))
    if kind not in ("response.created", "response.done"):
        return None
    return ResponseEvent(kind == "response.done", opt_str(response.get("id")), response)


def _usage(raw: Any) -> Usage | None:
    usage = as_dict(raw)
    if not usage:
        return None
    heard, said = as_dict(usage.get("input_token_details")), as_dict(usage.get("output_token_details"))
    return Usage(
        input_tokens=as_int(usage.get("input_tokens")),
        output_tokens=as_int(usage.get("output_tokens")),
        cached_tokens=as_int(heard.get("cached_tokens")),
        audio_input_tokens=as_int(heard.get("audio_tokens")),
        audio_output_tokens=as_int(said.get("audio_tokens")),
        cached_audio_tokens=as_int(as_dict(heard.get("cached_tokens_details")).get("audio_tokens")),
    )


def response_info(response: dict[str, Any]) -> ResponseInfo:
    """A `response.done` event's response: its function calls, transcript-free text, usage and status."""
    calls: list[ToolCall] = []
    texts: list[str] = []
    for raw in as_list(response.get("output")):
        item = as_dict(raw)
        kind = item.get("type")
        if kind == "function_call":
            arguments = item.get("arguments")
            calls.append(
                ToolCall(as_str(item.get("name")), as_str(arguments), opt_str(item.get("call_id")), len(calls))
            )
        elif kind == "message":
            texts.extend(as_str(as_dict(part).get("text")) for part in as_list(item.get("content")))
    status = opt_str(response.get("status"))
    failed = status == "failed"
    # A response cut short by the user speaking over it is `cancelled`: an interruption, not a failure.
    reason = as_dict(as_dict(response.get("status_details")).get("error")).get("message")
    return ResponseInfo(
        response_id=opt_str(response.get("id")),
        text="".join(texts),
        tool_calls=tuple(calls),
        finish_reason=status,
        usage=_usage(response.get("usage")),
        error=(opt_str(reason) or "response failed") if failed else None,
        complete=status not in ("failed", "cancelled"),
    )


class RealtimeAnswers(ResponsesAdapter):
    """What the guard answers a stopped Realtime response with: the session's `error` event.

    The guard asks a request's adapter for its answers; parsing is `response_info`'s
    (a Realtime response is read from its `response.done` event, not as a Responses body).
    """

    api = Api.REALTIME

    def error_response(self, notice: StopNotice, *, stream: bool, status: int = 429) -> Synthetic:
        error = {"type": "runguard_stopped", "code": error_code(notice.detector), "message": notice.message}
        event = {"type": "error", "event_id": f"event_runguard{secrets.token_hex(6)}", "error": error}
        return Synthetic(status, {}, orjson.dumps(event))

    def stop_response(self, notice: StopNotice, request: RequestInfo) -> Synthetic | None:
        return None  # a session cannot be given a made-up turn to end on: it is closed with the error
