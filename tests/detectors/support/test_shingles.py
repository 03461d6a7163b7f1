"""Shingles of tool results: echoes and volatile keys left out, a bounded sample kept, packed for state."""

from __future__ import annotations

import re

import xxhash

from runguard.detectors.support.normalize import DEFAULT_VOLATILE
from runguard.detectors.support.shingles import (
    KEEP,
    MAX_CHARS,
    MAX_PARSED,
    MAX_WORDS,
    echo_words,
    kept_shingles,
    pack,
    packed_sample,
    sample,
    shingles,
    units_of,
    unpack,
)
from tests.detectors.harness import call, result


def read(content: object, args: object = None) -> set[int]:
    r = result("search", content)
    return shingles(units_of(r, DEFAULT_VOLATILE), echo_words(call("search", args) if args is not None else None))


def test_json_units_keep_their_key_and_drop_volatile_keys() -> None:
    r = result("search", {"items": [{"name": "blue widget", "id": "x-1"}], "timestamp": 5})
    assert units_of(r, DEFAULT_VOLATILE) == ["name blue widget"]


def test_text_units_are_lines() -> None:
    assert units_of(result("read", "first line\nsecond line"), DEFAULT_VOLATILE) == ["first line\nsecond line"]
    # Each line is a unit of its own: a line echoing the query is left out, the others are read.
    args = {"query": "cheapest flight Lisbon to Berlin"}
    assert read("Results for cheapest flight Lisbon to Berlin\nTAP 552 at 89 EUR", args) == read("TAP 552 at 89 EUR")


def test_a_unit_echoing_the_arguments_is_left_out() -> None:
    args = {"query": "cheapest flight Lisbon to Berlin"}
    with_echo = read({"query": "cheapest flight Lisbon to Berlin", "results": ["TAP 552 at 89 EUR"]}, args)
    assert with_echo == read({"results": ["TAP 552 at 89 EUR"]}, args)
    # A unit that names a word of the query among others is content, not an echo.
    assert read({"results": ["TAP Lisbon to Berlin nonstop 89 EUR morning"]}, args)


def test_the_same_content_gives_the_same_shingles() -> None:
    assert read("alpha beta gamma delta") == read("Alpha  beta, gamma - delta") != read("alpha beta gamma omega")


def test_words_read_are_bounded() -> None:
    long = " ".join(f"w{i}" for i in range(5 * MAX_WORDS))
    assert len(read(long)) <= MAX_WORDS


def test_sample_is_a_bounded_consistent_subset() -> None:
    small = read(" ".join(f"w{i}" for i in range(100)))
    large = small | read(" ".join(f"v{i}" for i in range(2000)))
    kept = sample(large)
    assert len(kept) == KEEP
    # Bottom-k: what the larger set keeps of the smaller one's hashes, the smaller one keeps too.
    assert {h >> 48 for h in small} & set(kept) <= set(sample(small))


def test_sample_is_the_tops_of_the_smallest_hashes() -> None:
    hashes = read(" ".join(f"w{i}" for i in range(300)))
    assert sample(hashes) == [h >> 48 for h in sorted(hashes)[:KEEP]]
    assert sample(set()) == []


def test_packed_sample_packs_the_sample() -> None:
    few = read(" ".join(f"w{i}" for i in range(30)))
    twice = {5 << 48, (5 << 48) + 1, 7 << 48, 9 << 48}  # two hashes with the same top 16 bits
    for hashes in (few, twice, read(" ".join(f"w{i}" for i in range(3000))), set()):
        assert packed_sample(hashes) == pack(sample(hashes))
    assert unpack(packed_sample(twice)) == frozenset({5, 7, 9})


def test_pack_round_trips() -> None:
    values = [0, 1, 255, 256, 65535]
    assert unpack(pack(values)) == frozenset(values)
    assert unpack("not base64!") == frozenset()


def test_what_is_read_of_a_large_result_is_bounded() -> None:
    text = "\n".join(f"line {i} of a long file" for i in range(20_000))
    assert units_of(result("read", text), DEFAULT_VOLATILE) == [text[:MAX_CHARS]]
    rows = [{"name": f"row {i}", "note": "x" * 50} for i in range(2_000)]
    units = units_of(result("query", rows), DEFAULT_VOLATILE)
    assert sum(map(len, units)) <= MAX_CHARS + 64
    huge = result("query", {"rows": ["y" * 100] * (MAX_PARSED // 100)})
    assert units_of(huge, DEFAULT_VOLATILE) == [huge.content[:MAX_CHARS]]  # not parsed again: read as text


def test_json_text_inside_json_is_read_as_json() -> None:
    wrapped = result("search", {"result": '{"items": [{"name": "blue widget", "id": "x-1"}]}'})
    assert units_of(wrapped, DEFAULT_VOLATILE) == ["name blue widget"]


def test_words_are_the_regex_words_whatever_the_bytes() -> None:
    """`shingles` splits translated bytes instead of running `_WORD` per line: the same words, so the same
    hashes (a run's stored sketches stay comparable), for punctuation, digits, accents, CJK and control bytes."""
    word = re.compile(rb"[a-z0-9]+")
    units = [
        "Price: 89 EUR (TAP), depart 07:15",
        "Ünïcode façade — naïve café 東京 straße",
        "tabs\tand\rreturns\x0bvertical\x0cfeed   spaces",
        "a-b_c.d/e:f",
        "one",
        "",
        "x y",
        "\x00\x7f\xff weird \ud800 surrogate",
    ]
    expected: set[int] = set()
    for line in "\n".join(units).lower().encode("utf-8", "surrogatepass").split(b"\n"):
        words = word.findall(line)
        if len(words) <= 3:
            if words:
                expected.add(xxhash.xxh3_64_intdigest(b" ".join(words)))
        else:
            triples = zip(words, words[1:], words[2:], strict=False)
            expected.update(xxhash.xxh3_64_intdigest(b" ".join(t)) for t in triples)
    assert shingles(units, frozenset()) == expected
    assert len(expected) > 10


def test_kept_shingles_are_what_the_sample_reads_of_the_whole_set() -> None:
    """`novelty` and `text_loop` merge and sample the kept shingles only: the same samples as the whole sets'
    (a bottom-k sketch of a union is the bottom-k of the parts' bottom-k sketches)."""
    first = [" ".join(f"w{i}" for i in range(400)), "a short line"]
    second = [" ".join(f"w{i}" for i in range(200, 900))]  # overlaps the first
    whole_first, whole_second = shingles(first, frozenset()), shingles(second, frozenset())
    kept_first, kept_second = kept_shingles(first, frozenset()), kept_shingles(second, frozenset())
    assert kept_first <= whole_first and sorted(kept_first)[:KEEP] == sorted(whole_first)[:KEEP]
    assert sample(kept_first) == sample(whole_first)
    assert sample(kept_first | kept_second) == sample(whole_first | whole_second)
    assert packed_sample(kept_first | kept_second) == packed_sample(whole_first | whole_second)
    few = ["one two three four"]
    assert kept_shingles(few, frozenset()) == shingles(few, frozenset())  # fewer than KEEP: all of them
