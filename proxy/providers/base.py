"""The provider adapter interface.

An adapter does no I/O. It parses one provider API's request, response and
stream into `runguard.proxy.core.events` records, and writes that API's synthetic
responses (an error the SDK will not retry, or a completion that ends the
agent's turn). Parsing never raises on bad input: it returns a record whose
`parse_error` says what went wrong, so the proxy can forward anyway (fail open).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Protocol

from runguard.proxy.core.events import Api, Provider, RequestInfo, ResponseInfo
from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.common.history import HistorySlot


@frozen
class RequestContext:
    """What parsing a request may need beyond its body."""

    path_model: str | None = None  # Gemini: the model named in the URL
    agent_header: str | None = None  # X-Agent-Name, overrides the inferred agent
    stream_hint: bool = False  # Gemini: the :streamGenerateContent method
    extra: Mapping[str, str] = field(default_factory=dict)
    history: HistorySlot | None = None  # where a long conversation's checkpoints are kept (None: read it whole)
    session: str | None = None  # the session the request's headers name (`sessions.from_headers`), a digest
    client: str = "other"  # the family of the client that sent it (`clients.family_of`)


class StreamParser(Protocol):
    """Incremental parser of one response stream; chunks may split anywhere."""

    def feed(self, chunk: bytes) -> None: ...

    def close(self) -> ResponseInfo:
        """End of stream: everything seen so far, `complete=False` if truncated."""
        ...


class Adapter(Protocol):
    provider: Provider
    api: Api

    def parse_request(self, body: bytes, ctx: RequestContext) -> RequestInfo: ...

    def parse_response(self, body: bytes) -> ResponseInfo: ...

    def stream_parser(self) -> StreamParser: ...

    def error_response(self, notice: StopNotice, *, stream: bool, status: int = 429) -> Synthetic:
        """A provider-native error the SDK raises without retrying."""
        ...

    def stop_response(self, notice: StopNotice, request: RequestInfo) -> Synthetic | None:
        """A valid completion that ends the turn, streamed if the request asked.

        Its text is the notice's message, or, when the request demands a JSON
        schema, a JSON instance valid for that schema. None when no valid
        instance can be built (the caller falls back to `error_response`).
        """
        ...

    def stream_error_event(self, message: str, code: str) -> bytes:
        """Bytes that end a stream already under way with the provider's error event."""
        ...
