"""The Realtime API over a WebSocket (voice agents): each response of a session is a request of its run.

A Realtime session is one socket. Its responses start on the server (voice
activity detection ends a user's turn) or on a client's `response.create`; the
server announces each with `response.created` and ends it with
`response.done`, whose `usage` bills its input and output, the audio apart.

RunGuard cannot hold back a response the server has begun, so it decides when
one is announced: the response is admitted as a request of the session's run,
before the client hears of it. If the run is stopped (its budget spent, its
breaker open, a cap reached), the client gets an `error` event naming
RunGuard's code and the session is closed, which ends the response upstream.
`response.done` accounts for it: tokens, audio tokens and cost, its function
calls in the records. The outputs the client sends for those calls
(`conversation.item.create` with a `function_call_output`) are the tool results
of the next response, so the loop detectors judge a voice agent's tool calls as
an agent's. A session is a run of its own unless the handshake names one
(`X-Run-Id`). Other events pass unread, as does one that cannot be read.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

import orjson

from runguard.proxy.core.events import (
    AgentIdentity,
    Api,
    RequestInfo,
    ResponseInfo,
    ToolCall,
    ToolResult,
    Usage,
    digest,
)
from runguard.proxy.guard.policy import Tightening
from runguard.proxy.guard.ticket import Ticket
from runguard.proxy.providers.base import StopNotice, Synthetic
from runguard.proxy.providers.common.jsonish import as_dict, as_int, as_list, as_str, opt_str
from runguard.proxy.providers.common.openai_replies import error_code
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter

if TYPE_CHECKING:
    from runguard.proxy.relay.context import ProxyContext

_STARTED, _DONE, _OUTPUT = '"response.created"', '"response.done"', '"function_call_output"'
MAX_RESULTS = 64  # results kept for one response: a client sending more is not read further


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


class RealtimeSocket:
    """The responses of one Realtime session, admitted when announced and accounted when done."""

    def __init__(
        self,
        ctx: ProxyContext,
        key_hash: str,
        *,
        model: str,
        header_run: str | None,
        agent: str | None,
        tight: Tightening,
    ) -> None:
        self._ctx = ctx
        self._key_hash = key_hash
        self._header_run = header_run
        self._tight = tight
        self._adapter = RealtimeAnswers()
        self._model = model
        self._speaker = AgentIdentity(agent, digest("realtime\x00" + model, 8))
        self._root = digest("realtime\x00" + secrets.token_hex(8))  # this session
        self._open: dict[str | None, tuple[Ticket, float]] = {}  # response id -> its ticket, when it began
        self._calls: tuple[ToolCall, ...] = ()  # the last response's function calls
        self._results: list[ToolResult] = []  # their outputs the client has sent since

    async def from_client(self, text: str) -> list[str] | None:
        """Read a client event on its way upstream (always None: every one goes): a function call's output
        is a tool result of the session's next response, as a tool message is of an agent's next request."""
        if _OUTPUT not in text or len(self._results) >= MAX_RESULTS:
            return None
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        item = as_dict(payload.get("item")) if type(payload) is dict else {}
        if item.get("type") == "function_call_output":
            call_id = opt_str(item.get("call_id"))
            name = next((call.name for call in self._calls if call.call_id == call_id), None)
            self._results.append(ToolResult(name, call_id, as_str(item.get("output"))))
        return None

    def _next_request(self) -> RequestInfo:
        """The request a response now announced stands for: the last response's calls and their results."""
        results, self._results = tuple(self._results), []
        return RequestInfo(
            Api.REALTIME,
            self._model,
            True,
            self._speaker,
            root_hash=self._root,
            prior_calls=self._calls if results else (),
            new_results=results,
        )

    async def before_client(self, text: str) -> str | None:
        """Read a server event before the client gets it: None to pass it on, else the `error` event to
        send the client instead, after which the session is closed."""
        started = _STARTED in text
        if not started and _DONE not in text:
            return None
        try:
            payload = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if type(payload) is not dict:
            return None
        kind, response = payload.get("type"), as_dict(payload.get("response"))
        if kind == "response.created":
            return await self._admit(opt_str(response.get("id")), text)
        if kind == "response.done":
            await self._done(opt_str(response.get("id")), response)
        return None

    async def after_client(self, text: str) -> None:
        """Every event was read before the client got it (`before_client`)."""

    async def _admit(self, response_id: str | None, text: str) -> str | None:
        ctx = self._ctx
        ticket = await ctx.guard.admit(
            self._adapter,
            self._next_request(),
            body=text.encode(),
            key_hash=self._key_hash,
            header_run=self._header_run,
            tight=self._tight,
        )
        if ticket.answer is None:
            self._open[response_id] = (ticket, time.perf_counter())
            return None
        await ctx.settle(ctx.guard.complete(ticket, None, client_status=ticket.answer.status))
        return ticket.answer.body.decode()

    async def _done(self, response_id: str | None, response: dict[str, Any]) -> None:
        opened = self._open.pop(response_id, None)
        if opened is None:
            return
        ticket, began = opened
        guard = self._ctx.guard
        info = response_info(response)
        self._calls = info.tool_calls
        seen = guard.response_seen(ticket, info, 200, time.perf_counter() - began)
        await self._ctx.settle(guard.complete(ticket, seen, client_status=200))

    async def close(self, reason: str) -> None:
        """The session closed: account for the responses it cut off (a caller hanging up mid-answer is
        no upstream failure; their usage never comes)."""
        opened, self._open = self._open, {}
        guard = self._ctx.guard
        for ticket, began in opened.values():
            seen = guard.response_seen(ticket, ResponseInfo(complete=False), 200, time.perf_counter() - began)
            await guard.complete(ticket, seen, client_status=None, error=reason)
