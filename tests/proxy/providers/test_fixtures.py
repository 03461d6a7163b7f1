"""Every adapter over every case in `fixtures/<provider>/<case>/`.

A case is written by hand after the provider's documented wire format (no
case was captured from a provider): `request.json`, `response.json` and/or
`stream.sse` (bytes as the provider would send them; `test_fixture_types.py`
checks them against the SDKs' own types where an SDK ships them) and
`expected.json`, the normalized facts the adapter must produce. `expected.json` has a `request` and a `response`
section, an optional `stream` section when the stream says less than the body
(no usage, for instance), and for Gemini a `context` (model in the path,
streaming method). Streams are fed whole, byte by byte, at random split
points and gzip-compressed through `codec.stream_decoder`; the result must
never depend on where the bytes were split.
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runguard.proxy.core.events import RequestInfo, ResponseInfo
from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.registry import APIS
from runguard.proxy.relay.codec import stream_decoder

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# Every registered API's adapter, by its folder under providers/ (the fixtures' folder): a provider added
# to the registry is run over its cases with no edit here, and must bring some (`test_every_provider_has_cases`).
ADAPTERS: dict[str, Callable[[], Adapter]] = {spec.adapter.__module__.split(".")[3]: spec.adapter for spec in APIS}
CASES = sorted(path for path in FIXTURES.glob("*/*") if (path / "expected.json").is_file())
STREAM_CASES = [path for path in CASES if (path / "stream.sse").is_file()]
BODY_CASES = [path for path in CASES if (path / "response.json").is_file()]
SPLITS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def adapter_of(case: Path) -> Adapter:
    return ADAPTERS[case.parent.name]()


def expected_of(case: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((case / "expected.json").read_text())
    return data


def context_of(case: Path) -> RequestContext:
    context = expected_of(case).get("context", {})
    return RequestContext(
        path_model=context.get("path_model"),
        agent_header=context.get("agent_header"),
        stream_hint=bool(context.get("stream_hint", False)),
    )


def request_facts(info: RequestInfo) -> dict[str, Any]:
    schema = info.output_schema
    return {
        "model": info.model,
        "stream": info.stream,
        "agent": info.agent.name,
        "tool_names": list(info.tool_names),
        "prior_calls": [[call.name, call.arguments, call.call_id] for call in info.prior_calls],
        "new_results": [[result.name, result.call_id] for result in info.new_results],
        "new_user_turn": info.new_user_turn,
        "assistant_turns": info.assistant_turns,
        "output_schema": None if schema is None else {"dialect": schema.dialect, "name": schema.name},
        "previous_response_id": info.previous_response_id,
        "include_usage": info.include_usage,
        "root": info.root_hash is not None,
    }


def response_facts(info: ResponseInfo) -> dict[str, Any]:
    usage = info.usage
    return {
        "text": info.text,
        "tool_calls": [[call.name, call.arguments, call.call_id] for call in info.tool_calls],
        "handoffs": [[handoff.target, str(handoff.kind)] for handoff in info.handoffs],
        "finish_reason": info.finish_reason,
        "usage": None
        if usage is None
        else {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
        },
        "error": info.error,
        "complete": info.complete,
    }


def run_stream(adapter: Adapter, pieces: list[bytes]) -> ResponseInfo:
    parser = adapter.stream_parser()
    for piece in pieces:
        parser.feed(piece)
    return parser.close()


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[start:end] for start, end in itertools.pairwise(points)]


def test_every_provider_has_cases() -> None:
    found = {path.parent.name for path in CASES}
    assert found == set(ADAPTERS)  # every registered API has cases, and every case folder an API
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_request(case: Path) -> None:
    info = adapter_of(case).parse_request((case / "request.json").read_bytes(), context_of(case))
    assert info.parse_error is None
    assert request_facts(info) == expected_of(case)["request"]
    assert info.history_chars > 0 or not info.message_count
    assert info.estimated_input_tokens >= info.message_count


@pytest.mark.parametrize("case", BODY_CASES, ids=case_id)
def test_response_body(case: Path) -> None:
    info = adapter_of(case).parse_response((case / "response.json").read_bytes())
    assert info.parse_error is None
    assert response_facts(info) == expected_of(case)["response"]


@pytest.mark.parametrize("case", STREAM_CASES, ids=case_id)
def test_stream_whole_and_byte_by_byte(case: Path) -> None:
    adapter, data = adapter_of(case), (case / "stream.sse").read_bytes()
    expected = expected_of(case)
    whole = run_stream(adapter, [data])
    assert response_facts(whole) == expected.get("stream", expected["response"])
    assert whole.parse_error is None
    assert run_stream(adapter, [data[i : i + 1] for i in range(len(data))]) == whole
    assert run_stream(adapter, [b"", data, b""]) == whole


@pytest.mark.parametrize("case", STREAM_CASES, ids=case_id)
@SPLITS
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=40))
def test_stream_split_anywhere(case: Path, cuts: list[int]) -> None:
    adapter, data = adapter_of(case), (case / "stream.sse").read_bytes()
    assert run_stream(adapter, split_at(data, cuts)) == run_stream(adapter, [data])


@pytest.mark.parametrize("case", STREAM_CASES, ids=case_id)
@SPLITS
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=20))
def test_gzip_stream_split_anywhere(case: Path, cuts: list[int]) -> None:
    adapter, data = adapter_of(case), (case / "stream.sse").read_bytes()
    decode = stream_decoder("gzip")
    assert decode is not None
    decoded = [decode(piece) for piece in split_at(gzip.compress(data), cuts)]
    assert b"".join(decoded) == data
    assert run_stream(adapter, decoded) == run_stream(adapter, [data])


@pytest.mark.parametrize("case", [c for c in BODY_CASES if (c / "stream.sse").is_file()], ids=case_id)
def test_body_and_stream_agree_on_the_answer(case: Path) -> None:
    adapter = adapter_of(case)
    body = adapter.parse_response((case / "response.json").read_bytes())
    stream = run_stream(adapter, [(case / "stream.sse").read_bytes()])
    assert (stream.text, stream.tool_calls, stream.handoffs) == (body.text, body.tool_calls, body.handoffs)
    assert stream.finish_reason == body.finish_reason
