"""`replayed`: tool results an agent sends back as user text, and the calls they answer."""

from __future__ import annotations

import dataclasses

from runguard.detectors.support.replayed import (
    Asked,
    answers,
    echo_of,
    may_answer,
    may_replay,
    replayed_result,
    tail_digest,
    without_echo,
)
from runguard.proxy.core.events import RequestInfo
from tests.detectors.harness import call, request, result

TASK = "New task:\nFind a flight from Lisbon to Berlin."


def with_tools(assistant_turns: int, user_text: str) -> RequestInfo:
    return dataclasses.replace(request(assistant_turns=assistant_turns, user_text=user_text), tool_names=("search",))


def asked(turn: int, tail: str, agent: str = "ffffffff") -> Asked:
    return Asked(agent, turn, len(tail), tail_digest(tail), False, "a1b2", "search", ("search",), frozenset({1, 2}))


def test_asked_is_read_back_as_written() -> None:
    shown = asked(3, TASK)
    assert Asked.loads(shown.dumps()) == shown
    assert Asked.loads("garbage") is None and Asked.loads(None) is None


def test_which_requests_may_answer_calls_in_text() -> None:
    text = with_tools(assistant_turns=1, user_text="Observation:\n" + "x" * 300)
    assert may_replay(text) and may_answer(text, 200) and not may_answer(text, 400)
    native = dataclasses.replace(text, new_results=(result("search", "found"),))
    assert not may_replay(native)
    assert not may_replay(dataclasses.replace(text, prior_calls=(call("search"),)))
    assert not may_replay(request(assistant_turns=1, user_text="no tools declared"))


def test_the_text_answering_calls_follows_their_turn_or_grows_the_text_before() -> None:
    after = with_tools(assistant_turns=2, user_text="Observation:\nfound")
    assert answers(after, asked(1, TASK)) == ["Observation:\nfound"]
    grown = with_tools(assistant_turns=0, user_text=TASK + "\nError:\nfailed")
    assert answers(grown, asked(0, TASK)) == ["Error:\nfailed"]
    assert answers(grown, asked(0, "Another task.")) is None
    assert answers(after, asked(3, TASK)) is None
    assert answers(after, asked(1, TASK, agent="0123abcd")) is None  # another agent's calls


def test_a_labelled_json_answer_is_read_as_json() -> None:
    assert replayed_result('Observation:\n{"flights": []}', "search").content == '{"flights": []}'
    assert replayed_result("Call id: call_8fQ2xZ\nError: down", "search").content == "#\nError: down"


def test_lines_echoing_the_calls_are_left_out() -> None:
    echo = echo_of([call("search", {"query": "lowest fare LIS BER May"})])
    units = ["query lowest fare lis ber may", "TAP TP552 89 EUR LIS to BER\nquery: LIS BER"]
    assert without_echo(units, echo) == ["TAP TP552 89 EUR LIS to BER"]
    quoted = "Error executing tool 'search' with arguments {'query': 'lowest fare LIS BER May'}: timed out"
    assert without_echo([quoted], echo) == ["error executing tool search with arguments timed out"]
