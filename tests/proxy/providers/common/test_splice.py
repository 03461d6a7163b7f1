"""Finding spans in JSON bytes: the value of a member, the end of a value, an item appended."""

from __future__ import annotations

import orjson
import pytest

from runguard.proxy.providers.common.splice import append, member, object_start, skip_space, value_end

BODY = b' \n{"a" : "x\\"}]" , "list":[1, {"k":"]"}, [ ]] ,"n":-1.5e3,"a":{"last":true}}'


def test_the_object_starts_after_leading_space() -> None:
    assert object_start(BODY) == 2
    assert object_start(b"{}") == 0
    assert skip_space(b"a  \t b", 1) == 5


def test_a_member_s_value_is_the_last_of_its_name_as_parsers_read_it() -> None:
    span = member(BODY, object_start(BODY), "a")
    assert span is not None and orjson.loads(BODY[span[0] : span[1]]) == {"last": True}
    span = member(BODY, object_start(BODY), "list")
    assert span is not None and orjson.loads(BODY[span[0] : span[1]]) == [1, {"k": "]"}, []]
    span = member(BODY, object_start(BODY), "n")
    assert span is not None and BODY[span[0] : span[1]] == b"-1.5e3"
    assert member(BODY, object_start(BODY), "missing") is None


@pytest.mark.parametrize(("text", "end"), [(b'"a\\"b" x', 6), (b"[1,[2]] x", 7), (b"true,", 4), (b"12", 2)])
def test_a_value_ends_where_its_text_does(text: bytes, end: int) -> None:
    assert value_end(text, 0) == end


def test_unterminated_values_raise_for_the_caller_to_fail_open() -> None:
    with pytest.raises(ValueError):
        value_end(b'"open', 0)
    with pytest.raises(ValueError):
        value_end(b"[1, [2]", 0)


def test_an_item_is_appended_to_an_array_keeping_every_other_byte() -> None:
    body = b'{"list": [1 , 2 ]}'
    assert append(body, member(body, 0, "list"), b"3") == b'{"list": [1 , 2 ,3]}'
    empty = b'{"list": [ ]}'
    assert append(empty, member(empty, 0, "list"), b"3") == b'{"list": [ 3]}'
    scalar = b'{"list": "no"}'
    assert append(scalar, member(scalar, 0, "list"), b"3") is None
    assert append(body, None, b"3") is None
