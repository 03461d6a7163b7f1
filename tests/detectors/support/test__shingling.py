"""The C shingle kernel (`detectors/support/_shingling.c`) gives its Python twins' answers, whatever the text.

`shingles` and `sample` run the kernel where it is built and the twins where it is not; a stored sketch must
mean the same in both (a run's state outlives a restart onto another build), so the two are compared on
generated texts: lines of words with any whitespace, echoes, budgets that cut a line, hashes of any size.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runguard.detectors.support import shingles
from runguard.detectors.support.shingles import ECHO_SHARE, KEEP, MAX_WORDS, SHINGLE, hashes_py, tops_py
from tests.services import require_kernel

KERNEL = "runguard.detectors.support._shingling"
_WORDS = st.sampled_from([b"a", b"b", b"cc", b"price", b"89", b"eur", b"lisbon", b"x" * 40, b"\xc3\xa9"])
_SPACES = st.sampled_from([b" ", b"  ", b"\t", b"\r", b"\x0b", b"\x0c", b" \t "])
_LINES = st.lists(st.lists(st.tuples(_WORDS, _SPACES), max_size=12), max_size=8)


def _text(lines: list[list[tuple[bytes, bytes]]]) -> bytes:
    return b"\n".join(b"".join(word + space for word, space in line) for line in lines)


@pytest.fixture(scope="module")
def kernel() -> object:
    require_kernel(KERNEL, "libxxhash-dev")
    import runguard.detectors.support._shingling as built

    return built


@settings(max_examples=300, deadline=None)
@given(lines=_LINES, echo=st.frozensets(_WORDS, max_size=4), budget=st.integers(1, 40), keep=st.integers(0, 12))
def test_hashes_are_the_python_twins(
    kernel: object, lines: list[list[tuple[bytes, bytes]]], echo: frozenset[bytes], budget: int, keep: int
) -> None:
    text = _text(lines)
    assert shingles._hashes_c is not None
    kept = shingles._hashes_c(text, echo, budget, SHINGLE, ECHO_SHARE, keep)
    assert kept == hashes_py(text, echo, budget, keep)
    if keep:  # the smallest of the whole set
        assert kept == set(sorted(hashes_py(text, echo, budget))[:keep])


@settings(max_examples=300, deadline=None)
@given(
    text=st.binary(max_size=300),
    echo=st.frozensets(st.binary(min_size=1, max_size=3), max_size=6),
    budget=st.integers(1, 60),
    keep=st.integers(0, 8),
)
def test_any_bytes_are_hashed_as_the_python_twin_hashes_them(
    kernel: object, text: bytes, echo: frozenset[bytes], budget: int, keep: int
) -> None:
    assert shingles._hashes_c is not None
    assert shingles._hashes_c(text, echo, budget, SHINGLE, ECHO_SHARE, keep) == hashes_py(text, echo, budget, keep)


def test_hashes_of_edge_texts_are_the_python_twins(kernel: object) -> None:
    assert shingles._hashes_c is not None and shingles.compiled()
    for text in (b"", b"\n", b"\n\n  \n", b"one", b"one two three", b"one two three four\n", b"\n" * 3 + b"a b c d e"):
        for budget in (1, 2, 3, 4, MAX_WORDS):
            assert shingles._hashes_c(text, frozenset(), budget, SHINGLE, ECHO_SHARE, 0) == hashes_py(
                text, frozenset(), budget
            )
    # A line whose distinct words are 60% echo is left out (3 of 5); one at 2 of 5 is read.
    echo = frozenset({b"cheap", b"flight", b"lisbon"})
    for line in (b"cheap flight lisbon tap 89", b"cheap flight tap 89 eur"):
        assert shingles._hashes_c(line, echo, MAX_WORDS, SHINGLE, ECHO_SHARE, 0) == hashes_py(line, echo, MAX_WORDS)
    assert not shingles._hashes_c(b"cheap flight lisbon tap 89", echo, MAX_WORDS, SHINGLE, ECHO_SHARE, 0)


def test_long_lines_and_large_echoes_are_the_python_twins(kernel: object) -> None:
    """One line of 3,000 words (minified JSON read as text), with its words repeated and some echoed, and
    an echo of thousands of words (a call that wrote a file): the kernel's tables, not a word-by-word scan."""
    assert shingles._hashes_c is not None
    line = b" ".join(b"w%d" % (i % 700) for i in range(3000))
    big_echo = frozenset(b"w%d" % i for i in range(0, 5000, 3)) | {"not bytes"}  # type: ignore[operator]
    for echo in (frozenset({b"w1", b"w2"}), big_echo, frozenset(b"w%d" % i for i in range(700))):
        for budget in (MAX_WORDS, 5000):
            for keep in (0, KEEP):
                built = shingles._hashes_c(line, echo, budget, SHINGLE, ECHO_SHARE, keep)
                assert built == hashes_py(line, echo, budget, keep)


def test_hashes_refuse_what_the_twin_never_gets(kernel: object) -> None:
    assert shingles._hashes_c is not None
    with pytest.raises(ValueError):
        shingles._hashes_c(b"a b", frozenset(), 0, SHINGLE, ECHO_SHARE, 0)
    with pytest.raises(TypeError):
        shingles._hashes_c("text", frozenset(), 5, SHINGLE, ECHO_SHARE, 0)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(hashes=st.sets(st.integers(0, 2**64 - 1), max_size=120), keep=st.integers(0, 60))
def test_tops_are_the_python_twins(kernel: object, hashes: set[int], keep: int) -> None:
    assert shingles._tops_c is not None
    assert shingles._tops_c(hashes, keep) == tops_py(hashes, keep)
    assert shingles.sample(hashes) == tops_py(hashes, KEEP)


def test_sample_reads_ints_the_kernel_cannot(kernel: object) -> None:
    # Not 64-bit hashes (a test's made-up values, a negative): the Python twin answers, as it always did.
    odd = {2**70, 5 << 48, -(1 << 50)}
    assert shingles.sample(odd) == sorted(h >> 48 for h in odd)


def test_kept_shingles_are_the_smallest_with_the_kernel_and_all_without(
    kernel: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    units = [" ".join(f"w{i}" for i in range(300))]
    whole = shingles.shingles(units, frozenset())
    kept = shingles.kept_shingles(units, frozenset())
    assert kept == set(sorted(whole)[:KEEP])
    monkeypatch.setattr(shingles, "_hashes_c", None)
    assert shingles.kept_shingles(units, frozenset()) == whole  # the same sample, without a sort to cut it
    assert shingles.sample(whole) == shingles.sample(kept)


def test_shingles_give_the_same_hashes_without_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    units = ["Price: 89 EUR (TAP), depart 07:15", "one", "", "tabs\tand returns\r across a line"]
    echo = frozenset({b"price", b"89"})
    built = shingles.shingles(units, echo), shingles.sample(shingles.shingles(units, echo))
    monkeypatch.setattr(shingles, "_hashes_c", None)
    monkeypatch.setattr(shingles, "_tops_c", None)
    assert not shingles.compiled()
    assert (shingles.shingles(units, echo), shingles.sample(shingles.shingles(units, echo))) == built
    assert built[0]
