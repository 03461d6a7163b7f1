"""Reading a Responses request's input, tools, conversation and demanded schema."""

from __future__ import annotations

from typing import Any

from runguard.proxy.core.events import Api, OutputSchema, RequestInfo
from runguard.proxy.providers.common.conversation import Conversation
from runguard.proxy.providers.openai_responses.input import (
    conversation_id,
    output_schema_of,
    read_input,
    tools_of,
)
from tests.proxy.providers.common.forgiving import read_input_forgiving

INPUT: list[Any] = [
    {"role": "user", "content": "Find the total."},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "c1", "name": "search", "arguments": '{"q":"total"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "no hits"},
]


def _info(read: Any, items: Any) -> RequestInfo:
    talk = Conversation()
    read(talk, items)
    return talk.info(api=Api.RESPONSES, model="m", stream=False, agent_header=None, tool_names=())


def test_the_last_turn_s_calls_and_their_results() -> None:
    for read in (read_input, read_input_forgiving):
        info = _info(read, INPUT)
        assert [(c.name, c.call_id) for c in info.prior_calls] == [("search", "c1")]
        assert [(r.name, r.call_id, r.content) for r in info.new_results] == [("search", "c1", "no hits")]
        assert info.assistant_turns == 1 and not info.new_user_turn


def test_a_string_input_is_the_user_s_question() -> None:
    info = _info(read_input, "What is 2+2?")
    assert info.new_user_turn and info.new_user_texts == ("What is 2+2?",) and info.assistant_turns == 0


def test_tools_by_name_built_ins_by_type() -> None:
    tools = [
        {"type": "function", "name": "search", "parameters": {}},
        {"type": "custom", "name": "patch"},
        {"type": "web_search"},
        {"type": "function", "name": ""},
        "junk",
    ]
    assert tools_of(tools) == (("search", "patch", "web_search"), frozenset())


def test_the_conversation_an_id_or_an_object_with_one() -> None:
    assert conversation_id("conv_1") == "conv_1"
    assert conversation_id({"id": "conv_2"}) == "conv_2"
    assert conversation_id({"id": 3}) is None and conversation_id(None) is None


def test_the_output_schema_of_text_format() -> None:
    schema = {"type": "object"}
    assert output_schema_of({"format": {"type": "json_schema", "name": "out", "schema": schema}}) == OutputSchema(
        schema, "out"
    )
    assert output_schema_of({"format": {"type": "json_object"}}) == OutputSchema({}, None, "json_object")
    assert output_schema_of({"format": {"type": "text"}}) is None
    assert output_schema_of(None) is None
