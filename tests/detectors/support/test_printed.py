"""`printed`: a command's output as the set of its lines."""

from __future__ import annotations

from runguard.detectors.support.printed import printed_anew, printed_digest

OUTPUT = (
    "Loading fixtures\nrow 1: INV-4001 12.00 EUR\nrow 2: INV-4002 25.00 EUR\nFAILED: row 2 expected 13.00\n1 passed"
)


def test_the_same_lines_in_another_order_or_spacing_are_the_same_output() -> None:
    lines = OUTPUT.split("\n")
    shuffled = "\n".join([lines[2].replace(" ", "  "), "", *lines[:2], *lines[3:]])
    assert printed_digest([OUTPUT]) == printed_digest([shuffled])


def test_one_changed_line_is_another_output() -> None:
    assert printed_digest([OUTPUT]) != printed_digest([OUTPUT.replace("1 passed", "2 passed")])


def test_durations_are_left_out() -> None:
    assert printed_digest([f"{OUTPUT} in 0.12s"]) == printed_digest([f"{OUTPUT} in 0.31s"])


def test_a_turn_printed_anew_when_its_lines_were_never_printed_before() -> None:
    assert printed_anew(["a", "b", "a", "c"], 1)  # c is new
    assert not printed_anew(["a", "b", "a", "b"], 2)  # a flipped line alternating between two outputs
    assert not printed_anew(["a", "", "a"], 2)  # a turn of other tools ("") prints nothing new
