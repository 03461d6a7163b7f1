"""Argument tokens, Jaccard, result hashes and call/result pairing."""

from __future__ import annotations

import json

from runguard.detectors.normalize import (
    MAX_TOKENS,
    arg_tokens,
    args_digest,
    decode_tokens,
    encode_tokens,
    jaccard,
    keyed_values_digest,
    lowered,
    paired_results,
    result_digest,
    turn_signature,
)
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
