"""Reading a Gemini request's contents, tools and demanded schema."""

from __future__ import annotations

from runguard.proxy.core.events import AgentIdentity, OutputSchema
from runguard.proxy.providers.common.conversation import Conversation
from runguard.proxy.providers.gemini.contents import (
    SET_MODEL_RESPONSE,
    calls_of,
    output_schema_of,
    parts_of,
    read_contents,
    text_of_parts,
    tools_of,
)


def test_parts_text_and_calls_of_a_turn() -> None:
    content = {
        "role": "model",
        "parts": [
            {"text": "thinking", "thought": True},
            {"text": "Let me look."},
            {"functionCall": {"name": "search", "args": {"q": "x"}, "id": "c1"}},
            {"function_call": {"name": "fetch"}},
            "junk",
        ],
    }
    parts = parts_of(content)
    assert len(parts) == 5 and parts[4] == {}
    assert text_of_parts(parts) == "Let me look."
    assert text_of_parts(parts, thoughts=True) == "thinkingLet me look."
    calls = calls_of(parts, start=2)
    assert [(c.name, c.arguments, c.call_id, c.index) for c in calls] == [
        ("search", '{"q":"x"}', "c1", 2),
        ("fetch", "{}", None, 3),
    ]


def test_the_tail_after_the_last_model_turn_is_what_is_new() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "Find the total."}]},
        {"role": "model", "parts": [{"functionCall": {"name": "search", "args": {"q": "total"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "search", "response": {"hits": 0}}}]},
    ]
    talk = Conversation()
    read_contents(talk, contents)
    info = talk.info(api="gemini", model="g", stream=False, agent_header=None, tool_names=("search",))
    assert info.assistant_turns == 1
    assert [(c.name, c.arguments) for c in info.prior_calls] == [("search", '{"q":"total"}')]
    assert [(r.name, r.content, r.value) for r in info.new_results] == [("search", '{"hits":0}', {"hits": 0})]
    assert not info.new_user_turn
    assert isinstance(info.agent, AgentIdentity)


def test_tools_by_name_built_ins_by_key_and_agent_tools() -> None:
    agent_params = {"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]}
    tools = [
        {"functionDeclarations": [{"name": "search"}, {"name": ""}, {"name": "helper", "parameters": agent_params}]},
        {"googleSearch": {}},
        "junk",
    ]
    names, agents = tools_of(tools)
    assert names == ("search", "helper", "googleSearch")
    assert agents == frozenset({"helper"})


def test_the_output_schema_in_each_spelling_gemini_accepts() -> None:
    schema = {"type": "object"}
    assert output_schema_of({"responseJsonSchema": schema}, None) == OutputSchema(schema)
    assert output_schema_of({"response_schema": schema}, None) == OutputSchema(schema, dialect="openapi")
    assert output_schema_of({"responseMimeType": "application/json"}, None) == OutputSchema({}, None, "json_object")
    assert output_schema_of({}, None) is None


def test_adk_s_set_model_response_tool_carries_the_schema() -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}}
    tools = [{"function_declarations": [{"name": "search"}, {"name": SET_MODEL_RESPONSE, "parameters": schema}]}]
    assert output_schema_of({}, tools) == OutputSchema(schema, SET_MODEL_RESPONSE, "openapi")
    tools = [{"functionDeclarations": [{"name": SET_MODEL_RESPONSE, "parametersJsonSchema": schema}]}]
    assert output_schema_of({}, tools) == OutputSchema(schema, SET_MODEL_RESPONSE)
