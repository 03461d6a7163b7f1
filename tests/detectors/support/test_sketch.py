"""Argument tokens and sketches, Jaccard, and the canonical form a call's sketch is read from."""

from __future__ import annotations

import json
import re

import pytest
import xxhash

from runguard.detectors.support import normalize
from runguard.detectors.support.normalize import (
    call_args_digest,
    call_canonical,
)
from runguard.detectors.support.sketch import (
    MAX_TOKENS,
    arg_sketch,
    call_sketch,
    decode_tokens,
    encode_tokens,
    jaccard,
    sketch_similarity,
    writes_apart,
)
from tests.detectors.harness import call


def arg_tokens(arguments: str) -> tuple[str, ...]:
    """All the argument words of `arg_sketch`, sorted (what the tests compare)."""
    return tuple(sorted({token for _, tokens in arg_sketch(arguments) for token in tokens}))


def test_arg_tokens_are_lowercase_words_of_keys_and_values_hashed_and_sorted() -> None:
    a = arg_tokens(json.dumps({"Query": "AI Agents, cost-control!"}))
    b = arg_tokens(json.dumps({"query": "agents ai cost control"}))
    assert a == b
    assert len(a) == 5  # query, ai, agents, cost, control
    assert list(a) == sorted(a)
    assert all(len(token) == 4 for token in a)


def test_arg_tokens_are_capped_and_non_json_is_tokenized_as_text() -> None:
    many = arg_tokens(json.dumps({"text": " ".join(f"word{i}" for i in range(500))}))
    assert len(many) == MAX_TOKENS
    assert arg_tokens("not json at all") == arg_tokens('"not json at all"')


def test_encoded_tokens_round_trip() -> None:
    tokens = arg_tokens('{"a": "b c"}')
    assert decode_tokens(encode_tokens(tokens)) == tokens


def test_jaccard_is_exact_for_small_sets() -> None:
    a = arg_tokens('{"q": "one two three"}')
    b = arg_tokens('{"q": "one two four"}')
    assert jaccard(a, b) == 3 / 5  # q, one, two shared of q, one, two, three, four
    assert jaccard(a, a) == 1.0
    assert jaccard((), ()) == 0.0


def test_jaccard_estimates_large_sets_from_their_sketches() -> None:
    words = [f"w{i}" for i in range(400)]
    a = arg_tokens(json.dumps(" ".join(words[:300])))
    b = arg_tokens(json.dumps(" ".join(words[100:])))
    assert abs(jaccard(a, b) - 0.5) < 0.2  # true value 200/400


def test_a_calls_arguments_are_parsed_and_canonicalized_once_for_every_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    dumped: list[object] = []
    real_parse, real_dump = normalize.json_value, normalize.sorted_dump

    def parsing(text: str) -> object:
        parsed.append(text)
        return real_parse(text)

    def dumping(value: object) -> str:
        dumped.append(value)
        return real_dump(value)

    monkeypatch.setattr(normalize, "json_value", parsing)
    monkeypatch.setattr(normalize, "sorted_dump", dumping)
    c = call("web_search", {"query": "postgres vacuum tuning"})
    for _ in range(2):
        call_sketch(c)
        call_args_digest(c)
        call_canonical(c)
    assert parsed == [c.arguments]
    assert dumped == [{"query": "postgres vacuum tuning"}]


# -- argument tokens over real-looking queries -----------------------------------------------------

QUERY = "best practices for kubernetes pod autoscaling in production"


def query_tokens(text: str) -> tuple[str, ...]:
    return arg_tokens(json.dumps({"query": text}))


def test_arg_tokens_are_sorted_4_hex_strings_at_most_max_tokens() -> None:
    long_query = " ".join(f"{word}{i}" for i in range(40) for word in ("latency", "budget", "retry"))
    for tokens in (query_tokens(QUERY), query_tokens(long_query)):
        assert tokens
        assert list(tokens) == sorted(tokens)
        assert all(re.fullmatch(r"[0-9a-f]{4}", token) for token in tokens)
        assert len(tokens) <= MAX_TOKENS
        assert len(set(tokens)) == len(tokens)
    assert len(query_tokens(QUERY)) == 9  # query + 8 words
    assert len(query_tokens(long_query)) == MAX_TOKENS


def test_a_token_is_the_low_16_bits_of_its_words_xxh3_and_the_smallest_are_kept() -> None:
    # Sketches live in shared state: replicas of other releases must read the same tokens for the same words.
    def token(word: str) -> str:
        return f"{xxhash.xxh3_64_intdigest(word.encode()) & 0xFFFF:04x}"

    assert query_tokens("agent cost control") == tuple(sorted(token(w) for w in ("query", "agent", "cost", "control")))
    words = [f"w{i}" for i in range(3 * MAX_TOKENS)]
    smallest = tuple(sorted({token(w) for w in [*words, "q"]}))[:MAX_TOKENS]
    assert arg_tokens(json.dumps({"q": " ".join(words)})) == smallest


def test_arg_tokens_ignore_word_order_and_case() -> None:
    shuffled = "Production IN Autoscaling pod KUBERNETES for Practices best"
    assert query_tokens(shuffled) == query_tokens(QUERY)
    assert query_tokens(QUERY + " 2025") != query_tokens(QUERY)


def test_jaccard_of_similar_queries_is_high_and_of_unrelated_ones_low() -> None:
    base = query_tokens(QUERY)
    near = query_tokens("kubernetes pod autoscaling best practices for production clusters")
    unrelated = query_tokens("chocolate chip cookie recipe without eggs")
    assert jaccard(base, near) >= 0.7  # 8 of 10 words shared
    assert jaccard(base, unrelated) <= 0.1  # only the key "query" is shared
    assert jaccard(base, near) == jaccard(near, base)


def test_calls_writing_other_code_are_apart_though_their_words_are_alike() -> None:
    """Two edits of one file: the same path, other old and new texts of three lines or more (no words)."""

    def edit(old: str, new: str) -> str:
        return json.dumps({"file_path": "src/app.py", "old_string": old, "new_string": new})

    first = arg_sketch(edit("a = f(\n  x,\n)", "a = g(\n  x,\n)"))
    second = arg_sketch(edit("b = f(\n  y,\n)", "b = g(\n  y,\n)"))
    assert sketch_similarity(first, second) == 1.0  # words alone cannot tell them apart
    assert writes_apart(first, second)
    assert not writes_apart(first, first)
    # Calls that write nothing (words only) are judged by their words.
    queries = [arg_sketch(json.dumps({"query": q})) for q in ("cost control 2026", "cost control guide")]
    assert not writes_apart(*queries)
