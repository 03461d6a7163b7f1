"""Tools that run another agent, known by their declarations; their calls become delegations."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from agents import Agent, function_tool
from pydantic import BaseModel

from runguard.proxy.core.events import Handoff, HandoffKind, ResponseInfo, ToolCall
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.agent_tools import runs_an_agent
from runguard.proxy.providers.common.handoffs import with_agent_tools
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.providers.openai_responses.adapter import ResponsesAdapter


class Topic(BaseModel):
    topic: str


@function_tool
def search(input: str) -> str:
    """Search the web."""
    return input


RESEARCHER = Agent(name="Researcher", instructions="You research.")
AS_TOOL = RESEARCHER.as_tool(tool_name="research", tool_description="Research one topic.").params_json_schema
# The declarations ADK (2.13) sends: an `AgentTool`'s, and a function tool's with one argument named `request`.
ADK_AGENT_TOOL = {"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]}
ADK_FUNCTION = {
    "properties": {"request": {"title": "Request", "type": "string"}},
    "required": ["request"],
    "title": "fetchParams",
    "type": "object",
}


@pytest.mark.parametrize(
    "parameters",
    [
        pytest.param(AS_TOOL, id="as_tool"),
        pytest.param({**AS_TOOL, "title": "run_agent_args"}, id="as_tool-before-0.24"),
        pytest.param(ADK_AGENT_TOOL, id="adk-agent-tool"),
        pytest.param({"type": "OBJECT", "properties": {"request": {"type": "STRING"}}}, id="adk-openapi"),
    ],
)
def test_an_agent_tool_is_known_by_its_parameters(parameters: dict[str, Any]) -> None:
    assert runs_an_agent(parameters)


@pytest.mark.parametrize(
    "parameters",
    [
        pytest.param(search.params_json_schema, id="function-tool-with-input"),
        pytest.param(
            RESEARCHER.as_tool(tool_name="r", tool_description="d", parameters=Topic).params_json_schema,
            id="as_tool-with-its-own-schema",
        ),
        pytest.param(ADK_FUNCTION, id="adk-function-with-request"),
        pytest.param({**ADK_AGENT_TOOL, "properties": {"request": {"type": "integer"}}}, id="not-a-string"),
        pytest.param(
            {**AS_TOOL, "properties": {"input": {"type": "string"}, "depth": {"type": "integer"}}}, id="two-arguments"
        ),
        pytest.param({**AS_TOOL, "properties": {"query": {"type": "string"}}}, id="titled-without-input"),
        pytest.param(None, id="none"),
        pytest.param(["input"], id="a-list"),
    ],
)
def test_other_tools_are_not_agents(parameters: Any) -> None:
    assert not runs_an_agent(parameters)


def _parsed(adapter: Any, body: dict[str, Any]) -> tuple[tuple[str, ...], frozenset[str]]:
    info = adapter.parse_request(orjson.dumps(body), RequestContext("gemini-2.5-flash"))
    assert info.parse_error is None
    return info.tool_names, info.agent_tools


def test_each_api_names_the_request_s_agent_tools() -> None:
    responses = {
        "model": "gpt-4o",
        "input": "Write the report.",
        "tools": [
            {"type": "function", "name": "research", "parameters": AS_TOOL},
            {"type": "function", "name": "search", "parameters": search.params_json_schema},
            {"type": "web_search"},
        ],
    }
    assert _parsed(ResponsesAdapter(), responses) == (("research", "search", "web_search"), {"research"})
    chat = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Write the report."}],
        "tools": [
            {"type": "function", "function": {"name": "research", "parameters": AS_TOOL}},
            {"type": "function", "function": {"name": "search", "parameters": search.params_json_schema}},
        ],
    }
    assert _parsed(ChatAdapter(), chat) == (("research", "search"), {"research"})
    gemini = {
        "contents": [{"role": "user", "parts": [{"text": "Write the report."}]}],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "researcher", "parametersJsonSchema": ADK_AGENT_TOOL},
                    {"name": "fetch", "parametersJsonSchema": ADK_FUNCTION},
                    {
                        "name": "older_researcher",
                        "parameters": {"type": "OBJECT", "properties": {"request": {"type": "STRING"}}},
                    },
                ]
            },
            {"googleSearch": {}},
        ],
    }
    assert _parsed(GeminiAdapter(), gemini) == (
        ("researcher", "fetch", "older_researcher", "googleSearch"),
        {"researcher", "older_researcher"},
    )


def test_a_response_s_calls_of_agent_tools_are_delegations_to_them() -> None:
    transfer = Handoff("transfer_to_billing", "billing", HandoffKind.TRANSFER, "c1")
    response = ResponseInfo(
        tool_calls=(
            ToolCall("transfer_to_billing", "{}", "c1"),
            ToolCall("research", '{"input": "Research pricing"}', "c2"),
            ToolCall("search", '{"input": "pricing"}', "c3"),
        ),
        handoffs=(transfer,),
    )
    delegated = with_agent_tools(response, frozenset({"research"}))
    assert delegated.handoffs == (transfer, Handoff("research", "research", HandoffKind.DELEGATE, "c2"))
    assert delegated.tool_calls == response.tool_calls
    assert with_agent_tools(response, frozenset()) is response
    assert with_agent_tools(response, frozenset({"summarise"})) is response
