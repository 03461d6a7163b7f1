"""`printed`: a command's output as the set of its lines."""

from __future__ import annotations

from runguard.detectors.support.printed import printed_digest
from runguard.detectors.support.shingles import echo_words
from tests.detectors.harness import call

OUTPUT = (
    "Loading fixtures\nrow 1: INV-4001 12.00 EUR\nrow 2: INV-4002 25.00 EUR\nFAILED: row 2 expected 13.00\n1 passed"
)


def test_the_same_lines_in_another_order_or_spacing_are_the_same_output() -> None:
    lines = OUTPUT.split("\n")
    shuffled = "\n".join([lines[2].replace(" ", "  "), "", *lines[:2], *lines[3:]])
    assert printed_digest([OUTPUT], frozenset()) == printed_digest([shuffled], frozenset())


def test_one_changed_line_is_another_output() -> None:
    assert printed_digest([OUTPUT], frozenset()) != printed_digest(
        [OUTPUT.replace("1 passed", "2 passed")], frozenset()
    )


def test_durations_and_the_echoed_command_are_left_out() -> None:
    first = echo_words(call("bash", {"command": "python repro.py"}))
    second = echo_words(call("bash", {"command": "cd /repo && python repro.py 2>&1"}))
    one = printed_digest([f"$ python repro.py\n{OUTPUT} in 0.12s"], first)
    other = printed_digest([f"$ cd /repo && python repro.py 2>&1\n{OUTPUT} in 0.31s"], second)
    assert one == other
