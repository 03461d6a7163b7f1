"""The Realtime API over a WebSocket (voice agents): each response of a session is a request of its run.

RunGuard cannot hold back a response the server has begun, so it decides when
one is announced (`response.created`): the response is admitted as a request
of the session's run, in a `Passage`, before the client hears of it. If the
run is stopped (its budget spent, its breaker open, a cap reached), the client
gets an `error` event naming RunGuard's code and the session is closed, which
ends the response upstream. `response.done` ends its passage: tokens, audio
tokens and cost, its function calls in the records. The outputs the client
sends for those calls are the tool results of the next response, so the loop
detectors judge a voice agent's tool calls as an agent's. A session is a run
of its own unless the handshake names one (`X-Run-Id`). Other events pass
unread, as does one that cannot be read. What the events say is read by the
provider's sessions (`providers.sockets.Sessions`, listed in `registry.SESSIONS`).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from runguard.proxy.core.events import AgentIdentity, RequestInfo, ResponseInfo, ToolCall, ToolResult, digest
from runguard.proxy.guard import Passage, Tightening
from runguard.proxy.providers.sockets import SessionEvent, Sessions

if TYPE_CHECKING:
    from runguard.proxy.relay import ProxyContext

MAX_RESULTS = 64  # results kept for one response: a client sending more is not read further


class RealtimeSocket:
    """The responses of one Realtime session, admitted when announced and ended when done."""

    def __init__(
        self,
        ctx: ProxyContext,
        key_hash: str,
        sessions: Sessions,
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
        self._sessions = sessions
        self._adapter = sessions.answers()
        self._model = model
        self._speaker = AgentIdentity(agent, digest("realtime\x00" + model, 8))
        self._root = digest("realtime\x00" + secrets.token_hex(8))  # this session
        self._open: dict[str | None, Passage] = {}  # response id -> its passage
        self._calls: tuple[ToolCall, ...] = ()  # the last response's function calls
        self._results: list[ToolResult] = []  # their outputs the client has sent since

    async def from_client(self, text: str) -> list[str] | None:
        """Read a client event on its way upstream (always None: every one goes): a function call's output
        is a tool result of the session's next response, as a tool message is of an agent's next request."""
        if len(self._results) >= MAX_RESULTS:
            return None
        output = self._sessions.function_output(text)
        if output is not None:
            name = next((call.name for call in self._calls if call.call_id == output.call_id), None)
            self._results.append(ToolResult(name, output.call_id, output.output))
        return None

    def _next_request(self) -> RequestInfo:
        """The request a response now announced stands for: the last response's calls and their results."""
        results, self._results = tuple(self._results), []
        return RequestInfo(
            self._sessions.api(),
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
        event = self._sessions.response_event(text)
        if event is None:
            return None
        if not event.done:
            return await self._admit(event.response_id, text)
        await self._done(event)
        return None

    async def after_client(self, text: str) -> None:
        """Every event was read before the client got it (`before_client`)."""

    async def _admit(self, response_id: str | None, text: str) -> str | None:
        passage = self._ctx.guard.passage(
            self._adapter,
            self._next_request(),
            body=text.encode(),
            key_hash=self._key_hash,
            header_run=self._header_run,
            tight=self._tight,
        )
        await passage.enter()
        if passage.answer is None:
            self._open[response_id] = passage
            return None
        await passage.finish()
        return passage.answer.body.decode()

    async def _done(self, event: SessionEvent) -> None:
        passage = self._open.pop(event.response_id, None)
        if passage is None:
            return
        info = self._sessions.response_info(event.response)
        self._calls = info.tool_calls
        passage.seen(info, 200)
        passage.client_status = 200
        await passage.finish()

    async def close(self, reason: str) -> None:
        """The session closed: end the responses it cut off (a caller hanging up mid-answer is no upstream
        failure; their usage never comes)."""
        opened, self._open = self._open, {}
        for passage in opened.values():
            passage.seen(ResponseInfo(complete=False), 200)
            passage.error = reason
            await passage.finish()
