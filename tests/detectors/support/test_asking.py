"""`asking`: whether an agent was asked the same thing again."""

from __future__ import annotations

from runguard.detectors.support.asking import asked_alike, asked_entry
from tests.detectors.harness import call


def entry(text: str) -> str:
    return asked_entry(call("ask_flights", {"input": text}))


def test_a_task_in_other_words_asks_the_same() -> None:
    assert asked_alike(
        entry("flights: find the cheapest options from Lisbon to Berlin in May and report prices"),
        entry("flights: search again for the cheapest Lisbon to Berlin options in May and list prices"),
    )


def test_another_task_asks_something_new() -> None:
    assert not asked_alike(
        entry("flights: list the options from Lisbon to Berlin in May"),
        entry("flights: book the option the traveller picked: reference TP552"),
    )
    assert not asked_alike(entry("report the sales of 2023 by region"), entry("report the sales of 2024 by region"))


def test_a_task_without_words_asks_the_same_only_with_the_same_arguments() -> None:
    first, again, other = (asked_entry(call("ask_desk", {"order": n})) for n in ("A-17", "A-17", "A-18"))
    assert first.startswith("=") and asked_alike(first, again) and not asked_alike(first, other)
    assert not asked_alike(first, entry("flights: find the cheapest options"))
