"""Observers: the null one observes nothing, and a fan-out tells each, skipping one that fails."""

from __future__ import annotations

import logging

import pytest

from runguard.proxy.guard.observer import FanOut, NullObserver


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
