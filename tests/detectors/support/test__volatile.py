"""The C volatile-text stripper (`detectors/support/_volatile.c`) replaces what the regex replaces.

`normalize` digests a text tool result with its volatile parts (countdowns, UUIDs, ids, timestamps,
durations, addresses, long hex ids) as "#", through the C twin for ASCII text and for text whose other
characters the pattern reads only as punctuation (arrows, emoji, box lines), and the regex for the rest. A
digest is stored in run state and compared across requests and restarts, so the two must agree on every
text: they are compared on texts generated from the pieces the pattern's alternatives are made of, with
such characters among them, and on every code point beyond ASCII.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runguard.detectors.support import normalize
from runguard.detectors.support.normalize import strip_volatile, volatile_free_digest
from tests.services import require_kernel

KERNEL = "runguard.detectors.support._volatile"
# The pattern's pieces, in both cases, and what sits around them.
_PIECES = [
    *"0129-_:=#.,+ \t\n\x0b\x1c\x1fTtZzafFcexXgqrw!/()'\"",
    *("12", "2026", "0x", "ms", "MS", "s", "sec", "secs", "seconds", "Sec", "token", "tokens", "TOKENS", "left"),
    *("remaining", "id", "ID", "chunk", "trace", "request", "session", "call", "run", "Run", "abcdef", "deadbeef"),
    *("0123456789abcdef", "12:34:56", "2026-12-07", "ab12cd34", "-0530", "+05:30", ".25"),
]
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@pytest.fixture(scope="module")
def strip() -> object:
    require_kernel(KERNEL, "gcc")
    from runguard.detectors.support._volatile import strip as built

    return built


@settings(max_examples=3000, deadline=None)
@given(text=_TEXTS)
def test_the_kernel_replaces_what_the_regex_replaces(strip: object, text: str) -> None:
    assert normalize._strip_c is not None and normalize.stripper_compiled()
    assert normalize._strip_c(text) == normalize._VOLATILE.sub("#", text)


@settings(max_examples=500, deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=200))
def test_any_ascii_text_is_stripped_as_the_regex_strips_it(strip: object, text: str) -> None:
    assert normalize._strip_c is not None
    assert normalize._strip_c(text) == normalize._VOLATILE.sub("#", text)


def test_what_each_alternative_replaces(strip: object) -> None:
    assert normalize._strip_c is not None
    cases = {
        "41,230 tokens left": "# tokens left",
        "id 3f2a9c1e-1b2c-4d5e-8f90-0123456789ab done": "id # done",
        "chunk id: a81fQ2x, Session-ID=zz99xx00": "#, #",
        "at 2026-12-07T01:02:03.456+05:30 and 2026-12-07 01:02z": "at # and #",
        "12:34:56.789 then 12:34:56.7a": "# then #.7a",
        "took 35 ms, 1.5s, 3 secs, 10 seconds, 2 sections": "took #, #, #, #, 2 sections",
        "<obj at 0x7f3a9c1e2b40> 0XABCDEF": "<obj at #> #",
        "sha " + "ab" * 20 + " short " + "ab" * 10: "sha # short " + "ab" * 10,
        "pre-2026-12-07 x12:00:00 a_35ms": "pre-2026-12-07 x12:00:00 a_35ms",  # not at the start of a word
    }
    for text, stripped in cases.items():
        assert normalize._strip_c(text) == stripped == normalize._VOLATILE.sub("#", text), text


# Characters beyond ASCII the pattern reads as punctuation (the kernel as "?"), and ones it reads otherwise.
_INERT = ["\u2192", "\u2713", "\u2500", "\U0001f389", "\u00b7", "\u2014", "\udc80", "\u00a9"]
_READ = ["\u00e9", "\u212a", "\u017f", "\u0131", "\u0130", "\u00a0", "\u2003", "\u0663", "\u6771"]


@settings(max_examples=3000, deadline=None)
@given(text=st.lists(st.sampled_from(_PIECES + _INERT), max_size=30).map("".join))
def test_text_with_characters_the_pattern_reads_as_punctuation_is_stripped_as_the_regex_strips_it(
    strip: object, text: str
) -> None:
    assert normalize._strip_c is not None
    assert normalize._strip_c(text) == normalize._VOLATILE.sub("#", text)


@settings(max_examples=500, deadline=None)
@given(text=st.lists(st.sampled_from(_PIECES + _INERT), max_size=20).map("".join), read=st.sampled_from(_READ))
def test_a_character_the_pattern_reads_otherwise_is_left_to_the_regex(strip: object, text: str, read: str) -> None:
    assert normalize._strip_c is not None
    assert normalize._strip_c(text + read) is None and normalize._strip_c(read + text) is None
    assert normalize._without_volatile(text + read) == normalize._VOLATILE.sub("#", text + read)


def test_the_kernel_knows_every_character_the_pattern_reads(strip: object) -> None:
    # Beyond ASCII the pattern reads a character as a word's (any script's letters and digits), as a space, or
    # as an ASCII letter under IGNORECASE; what it reads as none of these it reads as it reads "?". The kernel
    # hands every text with one of the first kind to the regex: the two sets are the same, code point by point.
    reads = re.compile(r"[\w\s]|[a-z0-9]|[:=#.,+\- _]", re.IGNORECASE)
    assert normalize._strip_c is not None
    for code in range(0x80, 0x110000):
        character = chr(code)
        read = reads.fullmatch(character) is not None
        assert (normalize._strip_c(character + " 12:00:00") is None) == read, hex(code)
    read_file = "     1\u2192took 35 ms \u2713 at 12:00:00\U0001f389"  # Claude Code numbers a file's lines with arrows
    assert normalize._strip_c(read_file) == "     1\u2192took # \u2713 at #\U0001f389"


def test_text_the_kernel_leaves_and_builds_without_it_go_through_the_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Kelvin sign reads as "k" under the regex's IGNORECASE: "chun\u212a id" is a keyed id there.
    text = "chun\u212a id: a81fQ2x at 12:00:00 " + "x" * 6000 + " took 35 ms"
    expected = normalize._VOLATILE.sub("#", text[:1024])
    assert strip_volatile(text).startswith(expected) and expected.startswith("#")
    ascii_text = "request_id=ab12cd34ef took 35 ms " + "y" * 6000 + " at 2026-12-07T01:02:03Z"
    built = strip_volatile(ascii_text), volatile_free_digest(ascii_text)
    monkeypatch.setattr(normalize, "_strip_c", None)
    assert not normalize.stripper_compiled()
    assert (strip_volatile(ascii_text), volatile_free_digest(ascii_text)) == built
    assert built[0].startswith("# took # ") and built[0].endswith(" at #")
