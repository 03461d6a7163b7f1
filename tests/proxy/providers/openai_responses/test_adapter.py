"""The Responses adapter on item types beyond messages and function calls (whole cases: fixtures/)."""

from __future__ import annotations

from pathlib import Path

import orjson

from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter
from tests.e2e import payloads

CASE = Path(__file__).resolve().parents[4] / "fixtures" / "openai_responses" / "builtin_tool_calls"


def test_a_stream_cut_before_its_terminal_event_keeps_built_in_and_custom_calls() -> None:
    data = (CASE / "stream.sse").read_bytes()
    cut = data[: data.index(b"event: response.completed")]
    custom = (
        b'event: response.output_item.done\ndata: {"type":"response.output_item.done","output_index":3,'
        b'"item":{"type":"custom_tool_call","id":"ctc_1","call_id":"call_c1","name":"apply_diff",'
        b'"input":"*** Begin Patch"},"sequence_number":9}\n\n'
    )
    parser = ResponsesAdapter().stream_parser()
    parser.feed(cut + custom)
    info = parser.close()
    assert not info.complete
    assert [(c.name, c.arguments, c.call_id) for c in info.tool_calls] == [
        ("apply_patch", '{"type":"create_file","path":"missing.txt","diff":"+hello\\n"}', "call_ap1"),
        ("shell", '{"commands":["cat missing.txt"],"timeout_ms":null,"max_output_length":null}', "call_sh2"),
        ("apply_diff", "*** Begin Patch", "call_c1"),
    ]


def test_local_shell_output_names_its_call_by_id() -> None:
    body = (
        b'{"model":"gpt-5","input":[{"role":"user","content":"list"},'
        b'{"type":"local_shell_call","id":"lsh_1","call_id":"call_l1","status":"completed",'
        b'"action":{"type":"exec","command":["ls"],"env":{}}},'
        b'{"type":"local_shell_call_output","id":"call_l1","output":"a.txt"}]}'
    )
    info = ResponsesAdapter().parse_request(body, RequestContext())
    assert [(c.name, c.call_id) for c in info.prior_calls] == [("local_shell", "call_l1")]
    assert [(r.name, r.call_id, r.content) for r in info.new_results] == [("local_shell", "call_l1", "a.txt")]


def test_hosted_searches_are_counted_with_the_usage_whole_and_streamed() -> None:
    """OpenAI bills its web and file searches per call, apart from tokens: a page a search opens is no search."""
    response = payloads.researched(3)
    whole = ResponsesAdapter().parse_response(orjson.dumps(response))
    parser = ResponsesAdapter().stream_parser()
    for event in payloads.responses_events(response):
        parser.feed(b"data: " + orjson.dumps(event) + b"\n\n")
    for info in (whole, parser.close()):
        assert info.usage is not None and info.usage.input_tokens == 20
        assert info.usage.tool_calls == (("web_search", 3), ("file_search", 1))
        assert info.tool_calls == ()  # run by the provider: no call of the agent's


def test_a_response_without_hosted_searches_bills_no_calls() -> None:
    info = ResponsesAdapter().parse_response(orjson.dumps(payloads.response_object("hi")))
    assert info.usage is not None and info.usage.tool_calls == ()


def test_the_service_tier_comes_with_the_usage() -> None:
    body = {**payloads.response_object("hi"), "service_tier": "priority"}
    info = ResponsesAdapter().parse_response(orjson.dumps(body))
    assert info.usage is not None and info.usage.service_tier == "priority"
