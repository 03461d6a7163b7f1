"""Parsers never raise, whatever the bytes: mutated fixtures fed to every adapter.

Mutations: truncation, random byte flips, invalid UTF-8, a wrong JSON type in
any one field (at any depth, in requests, bodies and in each stream event),
and deeply nested JSON. Whatever comes out must also be well typed (strings
where the records promise strings), since detectors trust the records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runguard.proxy.core.events import RequestInfo, ResponseInfo, ToolCall
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.jsonish import JsonArrayItems
from runguard.proxy.providers.openai_chat.adapter import call_fields, call_fields_of
from tests.proxy.providers.test_fixtures import (
    CASES,
    STREAM_CASES,
    adapter_of,
    case_id,
    context_of,
    run_stream,
    split_at,
)

FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WRONG: list[Any] = [None, True, 0, -1, 2**63 - 1, 1.5, "", "x", "[DONE]", [], {}, [None], [[1]], {"a": {}}, ["x"]]
SENTINEL = "\x00deep\x00"
DEPTHS = [300, 1000, 3000]  # past orjson.dumps' limit (254), near and past orjson.loads' (1024)


def opt_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def check_call(call: ToolCall) -> None:
    assert isinstance(call.name, str) and isinstance(call.arguments, str)
    assert opt_str(call.call_id) and isinstance(call.index, int)


def check_request(info: object) -> None:
    assert isinstance(info, RequestInfo)
    assert isinstance(info.model, str) and isinstance(info.stream, bool)
    assert all(isinstance(name, str) for name in info.tool_names)
    for call in info.prior_calls:
        check_call(call)
    for result in info.new_results:
        assert opt_str(result.name) and opt_str(result.call_id) and isinstance(result.content, str)
    assert opt_str(info.previous_response_id) and opt_str(info.agent.name)
    assert info.include_usage in (None, True, False)
    if info.output_schema is not None:
        assert isinstance(info.output_schema.schema, dict) and opt_str(info.output_schema.name)


def check_response(info: object) -> None:
    assert isinstance(info, ResponseInfo)
    assert opt_str(info.response_id) and opt_str(info.model) and isinstance(info.text, str)
    assert opt_str(info.finish_reason) and opt_str(info.error) and opt_str(info.parse_error)
    for call in info.tool_calls:
        check_call(call)
    for handoff in info.handoffs:
        assert isinstance(handoff.target, str) and isinstance(handoff.tool, str)
    if info.usage is not None:
        assert all(isinstance(n, int) and n >= 0 for n in (info.usage.input_tokens, info.usage.output_tokens))


def parse_everything(case: Path, name: str, data: bytes) -> None:
    """Hand `data` to whichever parser reads that file of the case."""
    adapter = adapter_of(case)
    if name == "request.json":
        check_request(adapter.parse_request(data, context_of(case)))
        check_request(adapter.parse_request(data, RequestContext(agent_header="x", stream_hint=True)))
    elif name == "response.json":
        check_response(adapter.parse_response(data))
    else:
        check_response(run_stream(adapter, [data]))
        check_response(run_stream(adapter, [data[i : i + 7] for i in range(0, len(data), 7)]))


ONE_PER_PROVIDER = sorted({case.parent.name: case for case in CASES}.values())
FILES = [(case, f.name) for case in CASES for f in sorted(case.iterdir()) if f.name != "expected.json"]


def file_id(item: tuple[Path, str]) -> str:
    return f"{case_id(item[0])}/{item[1]}"


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths_of(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths_of(child, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = replaced(copy[head], rest, new)
    return copy


def is_bare_json(stream: bytes) -> bool:
    """A Gemini stream without SSE framing: a JSON array, or an error object."""
    return stream.lstrip()[:1] in (b"[", b"{")


def stream_events(data: bytes) -> list[tuple[bytes, Any]]:
    """(prefix before `data: `, JSON) per event of an SSE fixture; a bare JSON stream counts as one event."""
    if is_bare_json(data):
        try:
            return [(b"", json.loads(data))]
        except json.JSONDecodeError:  # a truncated fixture: its cuts are fuzzed by the byte-level test
            return []
    events = []
    for block in data.replace(b"\r\n", b"\n").split(b"\n\n"):
        head, marker, payload = block.rpartition(b"data: ")
        if marker and payload and payload != b"[DONE]":
            events.append((head, json.loads(payload)))
    return events


def rebuilt(raw: bytes, events: list[tuple[bytes, Any]], which: int, replacement: bytes) -> bytes:
    """The stream again, CRLF-framed, with event `which` replaced by the JSON text `replacement`."""
    if is_bare_json(raw):
        return replacement
    payloads = [json.dumps(p).encode() if i != which else replacement for i, (_, p) in enumerate(events)]
    return b"".join(head + b"data: " + text + b"\r\n\r\n" for (head, _), text in zip(events, payloads, strict=True))


@pytest.mark.parametrize(("case", "name"), FILES, ids=[file_id(item) for item in FILES])
@FUZZ
@given(data=st.data())
def test_truncated_and_flipped_bytes_never_raise(case: Path, name: str, data: st.DataObject) -> None:
    raw = (case / name).read_bytes()
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    parse_everything(case, name, raw[:cut])
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=8))
    mutated = bytearray(raw)
    for position, byte in flips:
        mutated[position] = byte
    parse_everything(case, name, bytes(mutated))
    bad_utf8 = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00"]))
    parse_everything(case, name, raw[:cut] + bad_utf8 + raw[cut:])


@pytest.mark.parametrize(("case", "name"), FILES, ids=[file_id(item) for item in FILES])
@FUZZ
@given(data=st.data())
def test_wrong_type_in_any_field_never_raises(case: Path, name: str, data: st.DataObject) -> None:
    raw = (case / name).read_bytes()
    if name == "stream.sse":
        events = stream_events(raw)
        if not events:
            return
        which = data.draw(st.integers(0, len(events) - 1), label="event")
        _, payload = events[which]
        path = data.draw(st.sampled_from(paths_of(payload)), label="path")
        new = data.draw(st.sampled_from(WRONG), label="value")
        mutated = rebuilt(raw, events, which, json.dumps(replaced(payload, path, new)).encode())
    else:
        payload = json.loads(raw)
        path = data.draw(st.sampled_from(paths_of(payload)), label="path")
        mutated = json.dumps(replaced(payload, path, data.draw(st.sampled_from(WRONG), label="value"))).encode()
    parse_everything(case, name, mutated)


def with_deep_value(payload: Any, path: tuple[Any, ...], depth: int) -> bytes:
    """`payload` as JSON text with the value at `path` nested `depth` lists deep (built as text: no recursion)."""
    text = json.dumps(replaced(payload, path, SENTINEL))
    return text.replace(json.dumps(SENTINEL), "[" * depth + '{"a":"b"}' + "]" * depth).encode()


@pytest.mark.parametrize(("case", "name"), FILES, ids=[file_id(item) for item in FILES])
@pytest.mark.parametrize("depth", DEPTHS)
def test_deeply_nested_json_in_every_field_never_raises(case: Path, name: str, depth: int) -> None:
    raw = (case / name).read_bytes()
    if name == "stream.sse":
        events = stream_events(raw)
        for which, (_, payload) in enumerate(events):
            for path in paths_of(payload)[1:]:
                parse_everything(case, name, rebuilt(raw, events, which, with_deep_value(payload, path, depth)))
    else:
        payload = json.loads(raw)
        for path in paths_of(payload)[1:]:
            parse_everything(case, name, with_deep_value(payload, path, depth))


@pytest.mark.parametrize("adapter_case", ONE_PER_PROVIDER, ids=case_id)
@pytest.mark.parametrize(
    "body",
    [b"", b"   ", b"null", b"[]", b"[{}]", b'"text"', b"42", b"{", b"\xff\xfe{}", b"{}" * 3, b'{"a":1}{"b":2}'],
)
def test_unreadable_request_has_parse_error(adapter_case: Path, body: bytes) -> None:
    info = adapter_of(adapter_case).parse_request(body, RequestContext())
    check_request(info)
    assert info.parse_error


@pytest.mark.parametrize("case", STREAM_CASES, ids=case_id)
@FUZZ
@given(garbage=st.binary(max_size=300))
def test_random_bytes_as_stream_never_raise(case: Path, garbage: bytes) -> None:
    check_response(run_stream(adapter_of(case), [garbage]))
    check_response(adapter_of(case).parse_response(garbage))


@pytest.mark.parametrize("case", STREAM_CASES, ids=case_id)
def test_huge_event_fed_in_small_pieces_is_parsed(case: Path) -> None:
    """One 4 MB event, fed 64 bytes at a time, is still read (bench/ measures that this stays linear)."""
    adapter = adapter_of(case)
    text = "x" * (4 << 20)
    payload = b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}], "type": "x"}).encode()
    data = payload + b"\n\n"
    parser = adapter.stream_parser()
    for start in range(0, len(data), 64):
        parser.feed(data[start : start + 64])
    check_response(parser.close())


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(alphabet='ab[]{}",\\: \n\u00e9'),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='k[]"\\', max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=4), max_size=5),
    indent=st.sampled_from([None, 2]),
    cuts=st.lists(st.integers(0, 1 << 12), max_size=20),
)
def test_json_array_items_come_out_whole_for_any_split(
    items: list[dict[str, Any]], indent: int | None, cuts: list[int]
) -> None:
    data = ("[" + ",\r\n".join(json.dumps(item, indent=indent) for item in items) + "]").encode()
    splitter = JsonArrayItems()
    found = [json.loads(item) for piece in split_at(data, cuts) for item in splitter.feed(piece)]
    assert found == items


# Mostly strings (empty ones too), as SDKs send, then the wrong types a broken client might.
_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.text(max_size=4),
    st.text(max_size=4),
    st.just(""),
    st.none(),
    st.integers(),
    st.lists(st.integers(), max_size=2),
    st.just({}),
)
_FUNCTION: st.SearchStrategy[Any] = st.one_of(
    st.fixed_dictionaries({"name": _VALUES, "arguments": _VALUES}),  # the usual shape, with odd values
    st.fixed_dictionaries({}, optional={"name": _VALUES, "arguments": _VALUES}),
    _VALUES,
)
_CALL_ENTRIES: st.SearchStrategy[Any] = st.one_of(
    st.fixed_dictionaries({"id": _VALUES, "type": st.just("function"), "function": _FUNCTION}),
    st.fixed_dictionaries({"id": _VALUES}, optional={"function": _FUNCTION}),
    st.fixed_dictionaries(
        {"id": _VALUES}, optional={"custom": st.fixed_dictionaries({}, optional={"name": _VALUES, "input": _VALUES})}
    ),
    _VALUES,
)


@given(st.lists(_CALL_ENTRIES, max_size=4))
@settings(max_examples=400, deadline=None)
def test_the_fast_read_of_tool_calls_agrees_with_the_forgiving_one(entries: list[Any]) -> None:
    # Every earlier turn of a long conversation takes the fast path for the usual shape.
    assert list(call_fields(entries)) == [call_fields_of(entry) for entry in entries]
