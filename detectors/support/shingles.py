"""Shingles: what a tool result says, as a small set of word-shingle hashes (for `novelty`).

A result is read as *units*: each scalar of a JSON result with the key it sits
under ("airline TAP", "price 89"), or each line of a text result. A unit whose
words mostly come from the call's own arguments (a search echoing its query,
"Results for 'cheap flights Lisbon'") is left out: it says what was asked, not
what was found. The other units' lowercase [a-z0-9] words become 3-word
shingles (a unit of three words or fewer is one shingle), each hashed with
XXH3-64. The `KEEP` smallest hashes are kept: a bottom-k sketch, the same
choice for every result, so a result that holds another whole keeps the
other's kept hashes. Stored, each kept hash is its top 16 bits.

Work is bounded: the first `MAX_CHARS` characters of a result (or of a JSON
result's scalars) and `MAX_WORDS` words are read.

The units, the hashing and the sample run in C kernels (`_units.c`;
`_shingling.c`, built where xxHash's header is: see setup.py) when they are
built, else in their Python twins here (`_Units`, `hashes_py`, `tops_py`),
which give the same answers.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Callable, Collection, Iterable, Sequence, Set
from operator import eq
from typing import Any

import xxhash

from runguard.detectors.support.normalize import NOT_JSON, call_canonical, parse_json, result_json
from runguard.proxy.core.events import ToolCall, ToolResult

_hashes_c: Callable[[bytes, Set[bytes], int, int, float, int], set[int]] | None
_tops_c: Callable[[Set[int], int], list[int]] | None
_units_c: Callable[[Any, Collection[str], int, int, int, Callable[[str], Any]], list[str]] | None
try:
    from runguard.detectors.support._shingling import hashes as _hashes_c
    from runguard.detectors.support._shingling import tops as _tops_c
except ImportError:  # built without the C kernel: the Python twins below
    _hashes_c = _tops_c = None
try:
    from runguard.detectors.support._units import units as _units_c
except ImportError:  # built without a C compiler: `_Units` below
    _units_c = None

SHINGLE = 3  # words per shingle
MAX_WORDS = 1200  # words read per result: a 300 KB file is judged by its first pages
KEEP = 48  # hashes kept per turn of one kind of tool (bottom-k)
MAX_DEPTH = 32
MAX_CHARS = 16_384  # characters of a result (or a turn's text) read: its first pages
MAX_PARSED = 65_536  # a JSON result longer than this is read as text, not parsed again
_OPENERS = ("{", "[")
ECHO_SHARE = 0.6  # a unit with this share of its words in the call's arguments only echoes them
_WORD = re.compile(rb"[a-z0-9]+")
# Every byte but [a-z0-9] and the newline as a space: `translate` then `split` find `_WORD`'s words at a few
# instructions a byte, where the regex costs about 200 (callgrind, a small result's shingles: 407k instructions
# with the regex per line, 255k with this and `isdisjoint` before the echo's intersection).
_SPACED = bytes(b if chr(b) in "abcdefghijklmnopqrstuvwxyz0123456789\n" else 32 for b in range(256))


def compiled() -> bool:
    """Whether the C kernels (`_shingling`, `_units`) are built and in use (else the Python twins run: the same
    answers, slower)."""
    return _hashes_c is not None and _units_c is not None


def echo_words(call: ToolCall | None) -> frozenset[bytes]:
    """The words of a call's arguments (keys and values), lowercase: what a result may echo."""
    if call is None:
        return frozenset()
    found: frozenset[bytes] | None = call.derived.get("echo")
    if found is None:
        # `_WORD`'s words, found as `shingles` finds them (every other byte a space, then split)
        found = frozenset(call_canonical(call).lower().encode("utf-8", "surrogatepass").translate(_SPACED).split())
        call.derived["echo"] = found
    return found


class _Units:
    """Collects the units of a JSON value, volatile keys left out, until `MAX_CHARS` characters are read: the
    Python twin of the C kernel's `units`, which `units_of` calls when it is built."""

    def __init__(self, volatile: Collection[str]) -> None:
        self.volatile = volatile
        self.out: list[str] = []
        self.room = MAX_CHARS

    def walk(self, value: Any, key: str, depth: int = 0) -> None:
        if depth > MAX_DEPTH or self.room <= 0:
            return
        if isinstance(value, dict):
            volatile, inside = self.volatile, depth < MAX_DEPTH
            for inner, item in value.items():
                name = inner if inner.__class__ is str else str(inner)
                if name.lower() in volatile:
                    continue
                kind = item.__class__
                if inside and ((kind is str and item[:1] not in _OPENERS) or kind is int or kind is float):
                    if (room := self.room) > 0:  # a plain scalar, added as `walk` would add it, without a call
                        unit = f"{name} {item}"
                        self.out.append(unit[:room])
                        self.room = room - len(unit)
                else:
                    self.walk(item, name, depth + 1)
        elif isinstance(value, list):
            for item in value:
                self.walk(item, key, depth + 1)
        elif isinstance(value, str) and value[:1] in _OPENERS and len(value) <= MAX_PARSED:
            # JSON text inside JSON (Gemini wraps a tool's text as {"result": "<text>"}; MCP answers in text parts)
            inner = parse_json(value)
            if isinstance(inner, dict | list):
                self.walk(inner, key, depth + 1)
            else:
                self.add(f"{key} {value}")
        elif value is not None:
            self.add(f"{key} {value}")

    def add(self, unit: str) -> None:
        self.out.append(unit[: self.room])
        self.room -= len(unit)


def units_of(result: ToolResult, volatile: Collection[str]) -> list[str]:
    """A result's units: its JSON scalars less the volatile keys, else its text (each line a unit); at most
    `MAX_CHARS` characters of them, and a result over `MAX_PARSED` characters is read as text."""
    value = result.value
    if value is None and result.content[:1] in _OPENERS and len(result.content) <= MAX_PARSED:
        value = result_json(result)
        value = None if value is NOT_JSON else value
    if isinstance(value, dict | list):
        if _units_c is not None:
            return _units_c(value, volatile, MAX_CHARS, MAX_DEPTH, MAX_PARSED, parse_json)
        units = _Units(volatile)
        units.walk(value, "")
        return units.out
    return [result.content[:MAX_CHARS]]  # its lines are read as units by `shingles`


def shingles(units: Iterable[str], echo: frozenset[bytes]) -> set[int]:
    """The shingle hashes of `units`, leaving out the units that only echo `echo`.

    The units are lowered and encoded as one text (two calls, not two per unit); its lines are hashed by the
    C kernel, else by `hashes_py`: this runs over every new tool result.
    """
    return _hashed(units, echo, 0)


def kept_shingles(units: Iterable[str], echo: frozenset[bytes]) -> set[int]:
    """The `KEEP` smallest of `shingles(units, echo)`: all that `sample` reads of them, and what the union of
    two such sets keeps of the union of the whole ones (a bottom-k sketch), so turns are merged and sampled
    from these alone. The C kernel keeps them as it hashes, and a long text's thousand hashes are never made
    Python ints; without it all of them are returned (the same samples: cutting them would cost a sort)."""
    return _hashed(units, echo, KEEP)


def _hashed(units: Iterable[str], echo: frozenset[bytes], keep: int) -> set[int]:
    text = "\n".join(units).lower().encode("utf-8", "surrogatepass").translate(_SPACED)
    if _hashes_c is not None:
        return _hashes_c(text, echo, MAX_WORDS, SHINGLE, ECHO_SHARE, keep)
    return hashes_py(text, echo, MAX_WORDS)


def hashes_py(text: bytes, echo: frozenset[bytes], budget: int, keep: int = 0) -> set[int]:
    """The XXH3-64 hashes of `text`'s 3-word shingles, line by line (a line of three words or fewer is one
    shingle), leaving out a line whose distinct words are at least `ECHO_SHARE` in `echo`, reading at most
    `budget` words; with `keep` over 0, only the `keep` smallest of them: the C kernel's `hashes` in Python.
    A line's echo is told by a set intersection."""
    hashes: set[int] = set()
    digest = xxhash.xxh3_64_intdigest
    join = b" ".join
    for line in text.split(b"\n"):
        words = line.split()
        if not words:
            continue
        if echo and not echo.isdisjoint(words) and len(echo.intersection(words)) >= ECHO_SHARE * len(set(words)):
            continue  # says what was asked
        count = len(words)
        if count > budget:
            words, count = words[:budget], budget
        budget -= count
        if count <= SHINGLE:
            hashes.add(digest(join(words)))
        else:
            # no `strict=`: a keyword makes each call build its arguments' dict (callgrind: 16k instructions of a
            # small result's 250k)
            hashes.update(map(digest, map(join, zip(words, words[1:], words[2:]))))  # noqa: B905
        if budget <= 0:
            break
    return set(sorted(hashes)[:keep]) if keep > 0 else hashes


def sample(hashes: Iterable[int]) -> list[int]:
    """The kept part of a set of shingle hashes: the `KEEP` smallest (a bottom-k sketch), as 16-bit values."""
    if _tops_c is not None and isinstance(hashes, set | frozenset):
        try:
            return _tops_c(hashes, KEEP)
        except OverflowError:  # not all 64-bit hashes: the Python twin reads any int
            pass
    return tops_py(hashes, KEEP)


def tops_py(hashes: Iterable[int], keep: int) -> list[int]:
    """The top 16 bits of each of `hashes` (64-bit), sorted, the first `keep` of them: the C kernel's `tops`."""
    # The top 16 bits of each hash, sorted, then cut: the same values as the tops of the smallest hashes (the shift
    # keeps their order), and a sort of 16-bit ints is cheaper than of 64-bit ones (callgrind: 56k instructions
    # for a small result's 69 hashes, 67k the other way round). C's sort of at most MAX_WORDS: heapq's is Python.
    tops = [h >> 48 for h in hashes]
    tops.sort()
    del tops[keep:]
    return tops


def packed_sample(hashes: Iterable[int]) -> str:
    """`pack(sample(hashes))`, without `pack`'s set and sort when the sorted sample holds no value twice (most
    do: callgrind, a small result's 69 hashes, 84k instructions against 93k)."""
    tops = sample(hashes)
    return _packed(sorted(set(tops)) if any(map(eq, tops, tops[1:])) else tops)


def pack(values: Iterable[int]) -> str:
    """16-bit values packed for state (base64 of big-endian pairs of bytes)."""
    return _packed(sorted(set(values)))


def _packed(listed: Sequence[int]) -> str:
    """Sorted distinct 16-bit values as `pack` stores them."""
    # binascii directly: base64.b64encode is a Python wrapper around it (same text, one call fewer)
    return binascii.b2a_base64(struct.pack(f">{len(listed)}H", *listed), newline=False).decode("ascii")


def unpack(text: str) -> frozenset[int]:
    """The values `pack` packed; an unreadable value reads as none."""
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return frozenset()
    return frozenset(struct.unpack(f">{len(raw) // 2}H", raw[: len(raw) // 2 * 2]))


def stale_shares(
    turns: Sequence[frozenset[int]], count: int, min_shingles: int, max_share: float
) -> list[float] | None:
    """The new shares (rounded to 3 places) of the last `count` of `turns`, each turn's hashes not held by any
    turn before it; None as soon as one of them has fewer than `min_shingles` hashes or a share over
    `max_share` (a turn that is not stale). `turns` holds more than `count` turns (the first is never judged)."""
    shares: list[float] = []
    for index in range(len(turns) - count, len(turns)):
        hashes = turns[index]
        if len(hashes) < min_shingles:
            return None
        earlier: set[int] = set()
        for before in turns[:index]:
            earlier |= before
        share = len(hashes - earlier) / len(hashes)
        if share > max_share:
            return None
        shares.append(round(share, 3))
    return shares
