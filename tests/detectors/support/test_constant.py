"""Constant text: what two different answers share is learned, with the rest of its block; one answer
repeated teaches nothing."""

from __future__ import annotations

from runguard.detectors.support.constant import constant_part, without_constant
from runguard.detectors.support.shingles import KEEP

BLOCK = frozenset(range(1000, 1030))  # a warning printed beside every answer


def answer(first: int, size: int = 12) -> frozenset[int]:
    return frozenset(range(first, first + size))


def test_what_two_different_answers_share_is_constant() -> None:
    turns = [BLOCK | answer(5000), BLOCK | answer(6000)]
    assert constant_part(turns, 8) == BLOCK
    assert without_constant(turns, 8) == [answer(5000), answer(6000)]


def test_one_answer_repeated_teaches_nothing() -> None:
    same = BLOCK | answer(5000)
    turns = [same, same, same | {7000}, same]
    assert constant_part(turns, 8) == frozenset()
    assert without_constant(turns, 8) == turns


def test_answers_that_differ_by_less_than_least_teach_nothing() -> None:
    assert constant_part([BLOCK | answer(5000, 6), BLOCK | answer(6000, 6)], 8) == frozenset()


def test_the_rest_of_a_block_rides_along_beyond_a_full_samples_reach() -> None:
    # Two long answers keep only the block's small values (their samples are full: KEEP values, up to 1009);
    # the block's other values are in every turn that can hold them.
    long_one = frozenset(range(1000, 1010)) | frozenset(range(10, 10 + KEEP - 10))
    long_two = frozenset(range(1000, 1010)) | frozenset(range(200, 200 + KEEP - 10))
    assert len(long_one) == len(long_two) == KEEP
    short = [BLOCK | answer(5000, 4), BLOCK | answer(6000, 4)]
    found = constant_part([long_two, long_one, *short], 8)
    assert found == BLOCK
    # A value one full sample could hold but does not have is no part of the block.
    assert constant_part([long_one, long_two, *[turn | {150} for turn in short]], 8) == BLOCK
