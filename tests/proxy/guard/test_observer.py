"""Observers are called on the request path: FanOut reaches every observer, and one that raises is logged
and skipped, never taking the others (or the request) down."""

from __future__ import annotations

import logging

import pytest

from runguard.proxy.guard.observer import FanOut, NullObserver, Observer
from runguard.proxy.store.records import RequestRecord, TripRecord

RECORD = RequestRecord("run", "k_0", 1, 0.0, "agent", "gpt-4o-mini", "openai", "chat", False, 200)


TRIP = TripRecord("run", "k_0", "spiral", "block", "looping", "run", 3, 0.0, 0.1, 100, 0.5)


class Calls:
    """Keeps every call it gets, as (hook, args)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def request_done(self, record: RequestRecord) -> None:
        self.calls.append(("request_done", (record,)))

    def tripped(self, trip: TripRecord) -> None:
        self.calls.append(("tripped", (trip,)))

    def detector_fault(self, detector: str, hook: str) -> None:
        self.calls.append(("detector_fault", (detector, hook)))

    def state_error(self) -> None:
        self.calls.append(("state_error", ()))

    def parse_error(self, api: str, body: str = "request") -> None:
        self.calls.append(("parse_error", (api, body)))

    def unreadable(self, provider: str, action: str) -> None:
        self.calls.append(("unreadable", (provider, action)))


class Broken(NullObserver):
    def tripped(self, trip: TripRecord) -> None:
        raise RuntimeError("webhook queue gone")


def _every_hook(observer: Observer) -> None:
    observer.request_done(RECORD)
    observer.tripped(TRIP)
    observer.detector_fault("spiral", "check_request")
    observer.state_error()
    observer.parse_error("chat", "response")
    observer.unreadable("gemini", "refuse")


EXPECTED = [
    ("request_done", (RECORD,)),
    ("tripped", (TRIP,)),
    ("detector_fault", ("spiral", "check_request")),
    ("state_error", ()),
    ("parse_error", ("chat", "response")),
    ("unreadable", ("gemini", "refuse")),
]


def test_the_null_observer_takes_every_hook() -> None:
    _every_hook(NullObserver())


def test_fan_out_passes_every_hook_to_every_observer_in_order() -> None:
    first, second = Calls(), Calls()
    _every_hook(FanOut([first, second]))
    assert first.calls == EXPECTED and second.calls == EXPECTED


def test_a_failing_observer_is_logged_and_the_others_still_hear(caplog: pytest.LogCaptureFixture) -> None:
    after = Calls()
    with caplog.at_level(logging.ERROR, logger="runguard.observe"):
        FanOut([Broken(), after]).tripped(TRIP)
    assert after.calls == [("tripped", (TRIP,))]
    (logged,) = caplog.records
    assert "failed" in logged.getMessage() and logged.exc_info is not None


class Noting:
    def __init__(self) -> None:
        self.seen: list[tuple[object, ...]] = []

    def request_done(self, record: object) -> None:
        self.seen.append(("request_done", record))

    def tripped(self, trip: object) -> None:
        self.seen.append(("tripped", trip))

    def detector_fault(self, detector: str, hook: str) -> None:
        self.seen.append(("detector_fault", detector, hook))

    def state_error(self) -> None:
        self.seen.append(("state_error",))

    def parse_error(self, api: str, body: str = "request") -> None:
        self.seen.append(("parse_error", api, body))

    def unreadable(self, provider: str, action: str) -> None:
        self.seen.append(("unreadable", provider, action))


class Failing(Noting):
    def state_error(self) -> None:
        raise RuntimeError("observer bug")


def test_a_fan_out_tells_every_observer_and_one_that_fails_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, failing, last = Noting(), Failing(), Noting()
    fan = FanOut([first, failing, last, NullObserver()])  # type: ignore[list-item]
    with caplog.at_level(logging.ERROR, "runguard.observe"):
        fan.state_error()
    fan.detector_fault("loop_detector", "check_request")
    fan.parse_error("chat", "response")
    fan.unreadable("openai", "refuse")
    fan.request_done("record")  # type: ignore[arg-type]
    fan.tripped("trip")  # type: ignore[arg-type]
    expected = [
        ("state_error",),
        ("detector_fault", "loop_detector", "check_request"),
        ("parse_error", "chat", "response"),
        ("unreadable", "openai", "refuse"),
        ("request_done", "record"),
        ("tripped", "trip"),
    ]
    assert first.seen == last.seen == expected
    assert "observer" in caplog.text and "failed" in caplog.text
