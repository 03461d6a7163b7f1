"""Result hashes without volatile keys, argument digests, and the per-call memos."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runguard.detectors.support import normalize
from runguard.detectors.support.normalize import (
    NOT_JSON,
    args_digest,
    call_args_digest,
    call_canonical,
    call_keyed_digest,
    call_tag,
    canonical,
    json_value,
    lowered,
    result_digest,
    result_digest_of,
    strip_volatile,
    tag,
    value_digest,
)
from runguard.detectors.support.sketch import (
    arg_sketch,
    call_sketch,
    call_targets,
)
from runguard.proxy.core.events import ToolCall, ToolResult, digest
from runguard.proxy.providers.common.jsonish import dumps_text
from tests.detectors.harness import call


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


@given(_OBJECTS, st.sampled_from([normalize.DEFAULT_VOLATILE, lowered(["id"]), frozenset()]))
def test_a_result_s_escaped_text_hashes_as_its_value_without_volatile_keys(value: object, keys: frozenset[str]) -> None:
    try:
        text = json.dumps(value, allow_nan=False)  # every non-ASCII character as a \u escape
    except ValueError:
        return  # an infinity: no JSON text
    expected = digest(orjson.dumps(_without(value, keys), option=orjson.OPT_SORT_KEYS))
    assert result_digest(text, keys) == expected


def test_a_volatile_key_or_json_text_spelled_with_escapes_counts_too() -> None:
    assert result_digest('{"\\u0069D": 1, "a": 2}') == result_digest('{"a": 2}')
    assert result_digest('{"a": "\\u007b\\"Id\\": 3}"}') == result_digest('{"a": {}}')
    assert result_digest('{"a": "\\u005b1, 2]"}') == result_digest('{"a": [1, 2]}')


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
    monkeypatch.setattr(normalize, "json_value", lambda text: pytest.fail("parsed the text back"))
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


def keyed_values_digest(arguments: str, keys: frozenset[str]) -> str:
    """`call_keyed_digest` of a call with these arguments."""
    return call_keyed_digest(ToolCall("f", arguments), keys)


def test_keyed_values_digest_finds_pagination_values() -> None:
    keys = lowered(["page", "pageToken"])
    assert keyed_values_digest('{"q": "x"}', keys) == "-"
    assert keyed_values_digest('{"q": "x", "page": 1}', keys) != keyed_values_digest('{"q": "y", "page": 2}', keys)
    assert keyed_values_digest('{"q": "x", "opts": {"PageToken": "t"}}', keys) != "-"


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


def test_volatile_text_is_left_out_of_a_text_result_s_digest() -> None:
    """What a client appends to every result (a countdown, a chunk id) and a command's timing are not content."""
    body = "E   AssertionError: 3 != 4\n1 failed, 2 passed in {}s"
    tail = "\n<system>{:,} tokens left. Chunk id: {}</system>"
    first = body.format("0.31") + tail.format(81_234, "a81fQ2xZ")
    again = body.format("0.29") + tail.format(74_410, "Zq09mB7e")
    assert result_digest(first) == result_digest(again)
    assert result_digest(first) != result_digest(first.replace("3 != 4", "3 != 5"))
    listing = "\n".join(f"src/module_{i}.py" for i in range(5_000))  # a long result: its ends are read
    assert result_digest(listing + tail.format(9_000, "k1x9Q2a7")) == result_digest(
        listing + tail.format(8_000, "Pm3v8Rt0")
    )
    assert strip_volatile("took 35 ms at 2026-12-06T04:00:01Z, object at 0x7f3a2b1c9d40") == "took # at #, object at #"


@pytest.mark.parametrize(
    "middle", ["plain ascii line\n" * 2_000, "zürich ünïcode line\n" * 2_000, "\ud83d lone\n" * 3_000]
)
def test_a_long_text_result_hashes_as_its_text_without_its_volatile_ends(middle: str) -> None:
    """Hashed in parts (its middle not copied), a long text result hashes as the whole text stripped would."""
    text = "started 2026-12-06T04:00:01Z\n" + middle + "\nrequest id: a81fQ2xZ9 done in 0.31s"
    assert len(text) > normalize.HEAD_CHARS + normalize.TAIL_CHARS
    assert result_digest(text) == digest(strip_volatile(text))
    half = len(text) // 2
    assert result_digest(text) != result_digest(text[:half] + "#" + text[half + 1 :])  # its middle is read


def _orjson_value(text: str) -> object:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return NOT_JSON


_STARTS = st.sampled_from([*" \t\n\r\x0b\x0c\x00", "", "\ufeff", "é", "x", "I", "N", "+", ".", "/", "#", "<"])
_BODIES = st.sampled_from(["{}", '{"a": [1, 2]}', "[]", '"s"', "-1.5", "0", "true", "false", "null", "NaN", "text"])


@given(lead=st.lists(_STARTS, max_size=4).map("".join), body=_BODIES, rest=st.text(max_size=20))
def test_json_value_reads_what_orjson_reads(lead: str, body: str, rest: str) -> None:
    for text in (lead + body, lead + body + rest, rest):
        assert json_value(text) == _orjson_value(text), repr(text)


def test_json_value_tells_text_from_its_first_character(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every character a text may start with: those no JSON value starts with are told at once, the others
    # (and whitespace before them) are parsed; either way as orjson reads them.
    for code in range(0x2100):
        for tail in ("", "1", "{}", ' "a"', "rue", "ull", "alse", "]"):
            text = chr(code) + tail
            assert json_value(text) == _orjson_value(text), repr(text)
    # A long text result (a file, a command's output) is not read through to its end to find it is no JSON.
    monkeypatch.setattr(orjson, "loads", lambda text: pytest.fail("parsed a text that starts as no JSON does"))
    assert json_value("    def main():\n" + "x = 1\n" * 50_000) is NOT_JSON
    assert json_value("Traceback (most recent call last):\n" * 1000) is NOT_JSON
