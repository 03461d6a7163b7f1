"""What the proxy's WebSocket guards (`proxy/sockets/`) read of a provider's socket protocols, as protocols.

Two kinds of socket are guarded, each reached through a spec:

- `RequestMessages` (`ProviderApi.socket`): a socket whose client messages are each a request of the API,
  answered by events on a lane (the Responses API's WebSocket mode). Its messages are read as `LaneMessage`s,
  a request's events by an `EventParser`, and a stopped request is answered with `messages_of`.
- `Sessions` (`registry.SESSIONS`): a session whose server starts responses (OpenAI's Realtime API):
  each response is admitted when announced (`SessionEvent`) and ends with its usage; the client's function
  outputs (`ToolOutput`) are the next response's tool results.

A provider's folder implements them (a module satisfies a protocol of functions); the core names no provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from runguard.proxy.core.events import Api, Provider, ResponseInfo
from runguard.proxy.providers.answers import Synthetic
from runguard.proxy.providers.base import Adapter


class LaneMessage(Protocol):
    """A socket message, read: its object and the lane it is on."""

    @property
    def payload(self) -> dict[str, Any]: ...

    @property
    def lane(self) -> str | None: ...

    @property
    def ending(self) -> int | None:
        """The status a terminal event ends its request with; None for an event that ends nothing."""
        ...


class EventParser(Protocol):
    """Reads one request's events, message by message."""

    def take(self, payload: dict[str, Any]) -> None: ...

    def close(self) -> ResponseInfo: ...


class RequestMessages(Protocol):
    """An API's WebSocket mode, where each client message that creates a response is a request."""

    def create(self, text: str) -> LaneMessage | None:
        """A client message that is a request; None for any other (it passes untouched)."""
        ...

    def read(self, text: str) -> LaneMessage | None:
        """A server message; None for one that cannot be read."""
        ...

    def unreadable_create(self, text: str) -> bool:
        """Whether a client message that `create` could not read names a request all the same (a lone
        surrogate, nesting past the parser's depth): judged as an unreadable request, never waved through."""
        ...

    def parser(self) -> EventParser:
        """A fresh reader of one request's events."""
        ...

    def messages_of(self, answer: Synthetic, lane: str | None) -> list[str]:
        """A stopped request's answer as the socket's messages, on its lane."""
        ...


class SessionEvent(Protocol):
    """A server event that begins (`done` False) or ends a response."""

    @property
    def done(self) -> bool: ...

    @property
    def response_id(self) -> str | None: ...

    @property
    def response(self) -> dict[str, Any]: ...


class ToolOutput(Protocol):
    """A client's output for one of a response's function calls."""

    @property
    def call_id(self) -> str | None: ...

    @property
    def output(self) -> str: ...


class Sessions(Protocol):
    """A provider's sessions over a WebSocket, whose server starts the responses."""

    def provider(self) -> Provider:
        """The provider whose upstream serves them."""
        ...

    def api(self) -> Api:
        """The API its requests are recorded as."""
        ...

    def serves(self, path: str) -> bool:
        """Whether a routed path opens a session."""
        ...

    def model(self, query: Mapping[str, str]) -> str:
        """The model a handshake's query names."""
        ...

    def answers(self) -> Adapter:
        """The adapter whose answers a stopped response gets."""
        ...

    def encoding(self, model: str) -> str | None:
        """The tiktoken encoding of a model it serves (`ProviderApi.encoding`)."""
        ...

    def function_output(self, text: str) -> ToolOutput | None: ...

    def response_event(self, text: str) -> SessionEvent | None: ...

    def response_info(self, response: dict[str, Any]) -> ResponseInfo:
        """What a finished response's object says (usage, calls, status)."""
        ...
