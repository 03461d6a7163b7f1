"""The Anthropic adapter's request fields: tools, forced tools and output schemas, end users."""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import RequestInfo
from runguard.proxy.providers.answers import StopNotice
from runguard.proxy.providers.anthropic.adapter import AnthropicAdapter
from runguard.proxy.providers.base import RequestContext

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ONE: Any = {"name": "final_result", "input_schema": SCHEMA}
TWO: Any = {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
QUESTION = [{"role": "user", "content": "Where?"}]


def parse(**fields: Any) -> RequestInfo:
    body = {"model": "claude-haiku-4-5", "max_tokens": 64, "messages": QUESTION, **fields}
    return AnthropicAdapter().parse_request(orjson.dumps(body), RequestContext())


def test_tools_name_client_and_server_tools_and_agent_tools() -> None:
    agent = {"name": "researcher", "input_schema": {"title": "AgentAsToolInput", "properties": {"input": {}}}}
    server = {"type": "web_search_20250305", "name": "web_search"}
    info = parse(tools=[TWO, server, agent])
    assert info.tool_names == ("lookup", "web_search", "researcher")
    assert info.agent_tools == frozenset({"researcher"})


def test_output_config_and_the_older_output_format_demand_a_schema() -> None:
    for fields in (
        {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},
        {"output_format": {"type": "json_schema", "schema": SCHEMA}},
    ):
        schema = parse(**fields).output_schema
        assert schema is not None and schema.schema == SCHEMA and schema.name is None


def test_a_forced_tool_demands_its_input_schema_under_its_name() -> None:
    named = parse(tools=[ONE, TWO], tool_choice={"type": "tool", "name": "final_result"}).output_schema
    assert named is not None and (named.name, named.schema) == ("final_result", SCHEMA)
    lone = parse(tools=[ONE], tool_choice={"type": "any"}).output_schema
    assert lone is not None and lone.name == "final_result"
    output_tool = parse(tools=[TWO, ONE], tool_choice={"type": "any"}).output_schema  # pydantic-ai's
    assert output_tool is not None and output_tool.name == "final_result"
    lookup = {"name": "fetch", "input_schema": SCHEMA}
    assert parse(tools=[TWO, lookup], tool_choice={"type": "any"}).output_schema is None  # the model picks
    assert parse(tools=[ONE], tool_choice={"type": "auto"}).output_schema is None
    assert parse(tools=[ONE], tool_choice={"type": "tool", "name": "missing"}).output_schema is None


def test_metadata_user_id_names_the_end_user() -> None:
    first, again = parse(metadata={"user_id": "u-1"}), parse(metadata={"user_id": "u-1"})
    assert (
        first.end_user is not None and first.end_user == again.end_user != parse(metadata={"user_id": "u-2"}).end_user
    )
    assert parse().end_user is None


def test_stream_flag_and_model() -> None:
    info = parse(stream=True)
    assert info.stream and info.model == "claude-haiku-4-5"
    assert not parse().stream


def test_stop_text_is_json_for_a_schema_and_none_when_no_instance_exists() -> None:
    notice = StopNotice("budget", "r1", "spent USD 5.00 of 5.00")
    answer = AnthropicAdapter().stop_response(
        notice, parse(output_config={"format": {"type": "json_schema", "schema": SCHEMA}})
    )
    assert answer is not None
    text = orjson.loads(answer.body)["content"][0]["text"]
    assert isinstance(orjson.loads(text)["city"], str)
    impossible = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
        "required": ["n"],
    }
    blocked = parse(output_config={"format": {"type": "json_schema", "schema": impossible}})
    assert AnthropicAdapter().stop_response(notice, blocked) is None  # the guard answers with the error instead
