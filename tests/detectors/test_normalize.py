"""Argument tokens, Jaccard, result hashes and call/result pairing."""

from __future__ import annotations

import json
import re

import orjson
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from runguard.detectors import normalize
from runguard.detectors.normalize import (
    MAX_TOKENS,
    arg_sketch,
    arg_tokens,
    args_digest,
    call_args_digest,
    call_canonical,
    call_sketch,
    call_tag,
    call_targets,
    canonical,
    decode_tokens,
    encode_tokens,
    jaccard,
    keyed_values_digest,
    lowered,
    paired_results,
    result_digest,
    result_digest_of,
    tag,
    turn_signature,
    value_digest,
)
from runguard.proxy.core.events import RequestInfo, ToolCall, ToolResult, digest
from runguard.proxy.providers.common.jsonish import dumps_text
from tests.detectors.harness import call, request, result


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


def test_result_digest_drops_volatile_keys_at_any_depth() -> None:
    a = json.dumps({"status": "error", "id": 1, "meta": {"Timestamp": "t1", "code": 7}})
    b = json.dumps({"meta": {"code": 7, "timestamp": "t2"}, "status": "error", "id": 2})
    assert result_digest(a) == result_digest(b)
    assert result_digest(a, lowered(["id"])) != result_digest(b, lowered(["id"]))
    assert result_digest("  partial parse error\n") == result_digest("partial parse error")


# -- results sent as JSON values (Gemini's functionResponse.response) -----------------------------

_KEYS = st.sampled_from(["id", "ID", "timestamp", "status", "rows", "error", "Ünïcode", "result", "next"])
_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text()
# Strings that hold JSON too: Gemini wraps a tool's text as {"result": "<text>"}, and that text is often JSON.
_JSON_TEXT = st.recursive(_SCALARS, lambda inner: st.dictionaries(_KEYS, inner, max_size=3), max_leaves=6).map(
    json.dumps
)
_VALUES = st.recursive(
    _SCALARS | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=25,
)
_OBJECTS = st.dictionaries(_KEYS, _VALUES, max_size=4) | st.lists(_VALUES, max_size=4)


@given(_OBJECTS, st.sampled_from([normalize.DEFAULT_VOLATILE, lowered(["status"]), frozenset()]))
def test_a_result_hashes_the_same_from_its_value_as_from_its_text(value: object, keys: frozenset[str]) -> None:
    content = dumps_text(value)
    expected = result_digest(content, keys)
    assert value_digest(value, keys) == expected
    assert result_digest_of(ToolResult("search", "c1", content, value), keys) == expected  # type: ignore[arg-type]
    assert result_digest_of(ToolResult("search", "c1", content), keys) == expected


def _without(value: object, keys: frozenset[str]) -> object:
    """The rule, spelled out plainly: drop keys at any depth, and read JSON text inside strings as JSON."""
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k.lower() not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return _without(orjson.loads(value), keys)
        except orjson.JSONDecodeError:
            return value
    return value


@given(_OBJECTS, st.sampled_from([normalize.DEFAULT_VOLATILE, lowered(["status"]), frozenset()]))
def test_a_result_hashes_as_its_value_without_volatile_keys_at_any_depth(value: object, keys: frozenset[str]) -> None:
    expected = digest(orjson.dumps(_without(value, keys), option=orjson.OPT_SORT_KEYS))
    assert value_digest(value, keys) == expected
    assert result_digest(dumps_text(value), keys) == expected


def test_volatile_keys_inside_json_text_inside_a_result_are_dropped_too() -> None:
    # Gemini wraps a tool's text as {"result": "<text>"}; MCP tools answer with JSON in a text part.
    def wrapped(request_id: str, at: str) -> str:
        inner = json.dumps({"rows": [1, 2], "request_id": request_id, "meta": {"timestamp": at}})
        return json.dumps({"result": inner, "parts": [json.dumps([{"id": request_id, "text": "ok"}])]})

    assert result_digest(wrapped("r1", "t1")) == result_digest(wrapped("r2", "t2"))
    assert result_digest(wrapped("r1", "t1"), frozenset()) != result_digest(wrapped("r2", "t2"), frozenset())


def test_a_result_with_its_value_is_not_parsed_back_from_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    value = {"result": "x" * 300_000, "request_id": "r-1"}
    same_answer = {"request_id": "r-2", "result": "x" * 300_000}
    monkeypatch.setattr(normalize, "_parse", lambda text: pytest.fail("parsed the text back"))
    a = result_digest_of(ToolResult("read_file", "c1", dumps_text(value), value))
    b = result_digest_of(ToolResult("read_file", "c2", dumps_text(same_answer), same_answer))
    assert a == b  # the volatile key still dropped
    assert a != result_digest_of(ToolResult("read_file", "c3", "{}", {}))


def test_a_result_too_deep_to_dump_is_hashed_as_its_text() -> None:
    deep: object = "bottom"
    for _ in range(300):  # orjson dumps at most 255 levels
        deep = [deep]
    content = dumps_text(deep)
    assert content.startswith("[[[")
    expected = digest(content)
    assert result_digest(content) == expected
    assert result_digest_of(ToolResult("walk", None, content, deep)) == expected  # type: ignore[arg-type]


def test_args_digest_ignores_key_order_and_spacing() -> None:
    assert args_digest('{"a": 1, "b": 2}') == args_digest('{"b":2,"a":1}')
    assert args_digest('{"a": 1}') != args_digest('{"a": 2}')


def test_keyed_values_digest_finds_pagination_values() -> None:
    keys = lowered(["page", "pageToken"])
    assert keyed_values_digest('{"q": "x"}', keys) == "-"
    assert keyed_values_digest('{"q": "x", "page": 1}', keys) != keyed_values_digest('{"q": "y", "page": 2}', keys)
    assert keyed_values_digest('{"q": "x", "opts": {"PageToken": "t"}}', keys) != "-"


def test_results_pair_with_calls_by_id_else_by_name_in_order() -> None:
    calls = [call("a", {"n": 1}, "x"), call("b", {}, "y")]
    req = request(prior_calls=calls, new_results=[result("b", "rb", "y"), result("a", "ra", "x")])
    assert [(c.call_id if c else None, r.content) for c, r in paired_results(req)] == [("y", "rb"), ("x", "ra")]
    gemini = [call("a", {"n": 1}), call("a", {"n": 2})]
    req = request(prior_calls=gemini, new_results=[result("a", "first"), result("a", "second")])
    assert [c.arguments if c else None for c, _ in paired_results(req)] == ['{"n": 1}', '{"n": 2}']
    req = request(prior_calls=[], new_results=[result(None, "orphan", "z")])
    assert paired_results(req)[0][0] is None


def test_turn_signature_covers_calls_and_results_and_ignores_order() -> None:
    a, b = call("get", {"k": "a"}, "1"), call("get", {"k": "b"}, "2")
    results = [result("get", "A", "1"), result("get", "B", "2")]
    one = turn_signature(request(prior_calls=[a, b], new_results=results))
    other = turn_signature(request(prior_calls=[b, a], new_results=results[::-1]))
    changed = turn_signature(request(prior_calls=[a, b], new_results=[result("get", "A2", "1"), results[1]]))
    assert one is not None and other is not None and changed is not None
    assert one[0] == other[0]
    assert one[0] != changed[0]
    assert turn_signature(request()) is None


# -- per-call and per-request memos ----------------------------------------------------------------

MEMO_ARGUMENTS = [
    '{"query": "AI agent cost control", "max_results": 10}',
    '{ "max_results":10 ,"query":"AI agent cost control" }',  # the same object, other key order and spacing
    '{"city": "Z\\u00fcrich", "max_price": 10.50}',  # canonical JSON unescapes and shortens: other words
    "  not   json,\n just text  ",
    "{}",
]


@pytest.mark.parametrize("arguments", MEMO_ARGUMENTS)
def test_call_memos_return_what_the_plain_functions_return(arguments: str) -> None:
    assert call_canonical(ToolCall("web_search", arguments)) == canonical(arguments)
    assert call_args_digest(ToolCall("web_search", arguments)) == args_digest(arguments)
    assert call_sketch(ToolCall("web_search", arguments)) == arg_sketch(arguments)
    assert call_tag(ToolCall("web_search", arguments)) == tag("web_search")
    # The same answers whichever memo is filled first.
    c = ToolCall("web_search", arguments)
    assert (call_sketch(c), call_args_digest(c), call_canonical(c), call_tag(c)) == (
        arg_sketch(arguments),
        args_digest(arguments),
        canonical(arguments),
        tag("web_search"),
    )


def test_call_memos_are_computed_once_and_kept_on_the_call() -> None:
    c = call("web_search", {"query": "site reliability engineering on-call handbook"}, "c1")
    assert c.derived == {}
    memos = (call_canonical, call_args_digest, call_sketch, call_targets, call_tag)
    first = [memo(c) for memo in memos]
    assert [memo(c) for memo in memos] == first
    for memo, value in zip(memos, first, strict=True):
        assert memo(c) is value
        assert any(stored is value for stored in c.derived.values())
    assert len(c.derived) == len(memos)


def test_a_calls_arguments_are_canonicalized_once_for_every_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    canonicalized: list[str] = []
    real = normalize.canonical

    def counting(arguments: str) -> str:
        canonicalized.append(arguments)
        return real(arguments)

    monkeypatch.setattr(normalize, "canonical", counting)
    c = call("web_search", {"query": "postgres vacuum tuning"})
    for _ in range(2):
        call_sketch(c)
        call_args_digest(c)
        call_canonical(c)
    assert canonicalized == [c.arguments]


def test_equal_calls_keep_separate_memos() -> None:
    a = call("web_search", {"query": "rust async runtime comparison"}, "c1")
    b = call("web_search", {"query": "rust async runtime comparison"}, "c1")
    assert a == b
    call_canonical(a)
    call_sketch(a)
    call_tag(a)
    assert b.derived == {}
    assert call_sketch(b) == call_sketch(a)
    assert call_sketch(b) is not call_sketch(a)  # computed for b, not read from a's memo
    # A memo is read only from its own call: what a holds never answers for b.
    a.derived["tag"] = "not-a-tag"
    assert call_tag(a) == "not-a-tag"
    assert call_tag(b) == tag("web_search")


def test_turn_signature_is_the_same_on_a_second_call_and_for_an_equal_request() -> None:
    def build() -> RequestInfo:
        calls = [call("web_search", {"query": "vector database benchmarks"}, "c1"), call("read_url", {"u": "x"}, "c2")]
        return request(
            prior_calls=calls, new_results=[result("web_search", "hits", "c1"), result("read_url", "page", "c2")]
        )

    req = build()
    first = turn_signature(req)
    assert first is not None
    assert turn_signature(req) == first
    assert turn_signature(req) is first
    other = build()
    assert other == req and other.derived == {}
    assert turn_signature(other) == first


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
