"""Hooks through which the guard reports what happened (metrics, alerts, logs).

The guard calls these synchronously on the request path, so implementations
must be cheap and must not raise (a failing observer is caught and ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from runguard.proxy.store.records import RequestRecord, TripRecord


class Observer(Protocol):
    def request_done(self, record: RequestRecord) -> None: ...

    def tripped(self, trip: TripRecord) -> None: ...

    def detector_fault(self, detector: str, hook: str) -> None: ...

    def state_error(self) -> None: ...

    def parse_error(self, api: str, body: str = "request") -> None: ...

    def unreadable(self, provider: str, action: str) -> None:
        """A model request whose body cannot be read: `action` says what became of it (`forward`, `refuse`,
        as `guard.unreadable` says, or `blocked`: a breaker or a cap answered it)."""
        ...


class NullObserver:
    """Observes nothing; the default."""

    def request_done(self, record: RequestRecord) -> None:
        pass

    def tripped(self, trip: TripRecord) -> None:
        pass

    def detector_fault(self, detector: str, hook: str) -> None:
        pass

    def state_error(self) -> None:
        pass

    def parse_error(self, api: str, body: str = "request") -> None:
        pass

    def unreadable(self, provider: str, action: str) -> None:
        pass


class FanOut:
    """Several observers as one; a failing observer is logged and skipped."""

    def __init__(self, observers: list[Observer]) -> None:
        self.observers = tuple(observers)  # fixed: their methods are bound once (`_each`)
        self._bound: dict[str, list[tuple[Observer, Callable[..., None]]]] = {}

    def _each(self, method: str, *args: object) -> None:
        calls = self._bound.get(method)
        if calls is None:  # each observer's method looked up once, not per request
            calls = self._bound[method] = [(o, getattr(o, method)) for o in self.observers]
        for observer, call in calls:
            try:
                call(*args)
            except Exception:
                logging.getLogger("runguard.observe").exception("observer %r failed", observer)

    def request_done(self, record: RequestRecord) -> None:
        self._each("request_done", record)

    def tripped(self, trip: TripRecord) -> None:
        self._each("tripped", trip)

    def detector_fault(self, detector: str, hook: str) -> None:
        self._each("detector_fault", detector, hook)

    def state_error(self) -> None:
        self._each("state_error")

    def parse_error(self, api: str, body: str = "request") -> None:
        self._each("parse_error", api, body)

    def unreadable(self, provider: str, action: str) -> None:
        self._each("unreadable", provider, action)
