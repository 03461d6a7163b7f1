"""The forgiving JSON readers: wrong types read as empty, nothing raises."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runguard.proxy.providers.common.jsonish import (
    TOO_DEEP,
    JsonArrayItems,
    as_dict,
    as_int,
    as_list,
    as_str,
    dumped_length,
    dumps_text,
    load_object,
    opt_str,
    pick,
    text_of,
)


def test_load_object_says_why_a_body_is_not_an_object() -> None:
    assert load_object(b'{"a": 1}') == ({"a": 1}, None)
    assert load_object(b"") == (None, "empty body")
    assert load_object(b"[1]") == (None, "the body is not a JSON object")
    data, problem = load_object(b"{nope")
    assert data is None and problem is not None and problem.startswith("invalid JSON: ")


@pytest.mark.parametrize("value", [None, 1, "s", [1], {"a": 1}, True])
def test_wrong_types_read_as_empty(value: Any) -> None:
    assert as_dict(value) == (value if isinstance(value, dict) else {})
    assert as_list(value) == (value if isinstance(value, list) else [])
    assert as_str(value) == (value if isinstance(value, str) else "")


def test_optional_strings_and_counts() -> None:
    assert [opt_str(v) for v in ("id", "", None, ["id"], 3)] == ["id", None, None, None, None]
    assert [as_int(v) for v in (3, 0, -2, True, 2.5, "4", None)] == [3, 0, 0, 0, 0, 0, 0]


def test_pick_prefers_camel_case_and_reads_snake_case() -> None:
    assert pick({"systemInstruction": 1, "system_instruction": 2}, "systemInstruction", "system_instruction") == 1
    assert pick({"system_instruction": 2}, "systemInstruction", "system_instruction") == 2
    assert pick({}, "a", "b") is None


def test_text_of_a_string_or_parts_with_text_or_refusal() -> None:
    assert text_of("hi") == "hi"
    parts = ["a", {"type": "text", "text": "b"}, {"refusal": "no"}, {"type": "image_url"}, 7]
    assert text_of(parts) == "a\nb\nno"
    assert text_of({"text": "x"}) == ""


def test_dumps_text_is_compact_and_survives_deep_nesting() -> None:
    assert dumps_text("as is") == "as is"
    assert dumps_text({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    deep: Any = []
    for _ in range(300):  # past orjson's 255 levels: the stdlib writes it
        deep = [deep]
    assert dumps_text(deep) == "[" * 301 + "]" * 301
    deeper: Any = []
    for _ in range(100_000):
        deeper = [deeper]
    assert dumps_text(deeper) == TOO_DEEP


@pytest.mark.parametrize("value", ["plain", {"a": "é", "b": [1, 2]}, [{"x": None}], 12, {"s": "ascii"}])
def test_dumped_length_is_the_length_of_the_dumped_text(value: Any) -> None:
    assert dumped_length(value) == len(dumps_text(value))


def test_json_array_items_come_out_whole_wherever_the_chunks_split() -> None:
    items = [{"a": ']}[{\\"', "n": [1, {"b": 2}]}, {"c": "x"}, {"d": []}]
    body = orjson.dumps(items)
    for size in (1, 2, 3, 7, len(body)):
        reader = JsonArrayItems()
        out = [item for at in range(0, len(body), size) for item in reader.feed(body[at : at + size])]
        assert [orjson.loads(item) for item in out] == items


def test_json_array_items_keep_what_a_truncated_array_closed() -> None:
    reader = JsonArrayItems()
    assert [orjson.loads(i) for i in reader.feed(b'[{"a":1},{"b":')] == [{"a": 1}]
    assert reader.feed(b"") == []
