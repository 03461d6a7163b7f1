"""Tools that run another agent: openai-agents' `Agent.as_tool`, Google ADK's `AgentTool`.

The caller waits for the other agent's answer as the tool's result, as an Agno
leader waits for its member, so a call of such a tool is a delegation
(`HandoffKind.DELEGATE`, to the tool's name). Nothing in the call says so: the
tool's declaration in the request does.

- openai-agents: parameters titled `AgentAsToolInput` (0.24 and later) or
  `run_agent_args` (earlier releases), with the one property `input`;
- ADK: untitled parameters with the one property `request`, a bare string
  (an `AgentTool` whose agent has no input schema; a function tool with one
  argument `request` has its schema and the property titled).

An agent tool declared with a schema of its own (`as_tool(parameters=...)`, an
ADK agent's `input_schema`) is not recognised and stays a tool, as before.
"""

from __future__ import annotations

from typing import Any

AS_TOOL_TITLES = frozenset({"AgentAsToolInput", "run_agent_args"})


def runs_an_agent(parameters: Any) -> bool:
    """Whether a tool declared with these parameters (a JSON schema, or Gemini's OpenAPI dialect) runs
    another agent."""
    if not isinstance(parameters, dict):
        return False
    properties = parameters.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return False  # the usual tool: several arguments
    title = parameters.get("title")
    if title is not None:
        return title in AS_TOOL_TITLES and "input" in properties
    request = properties.get("request")
    if not isinstance(request, dict) or len(request) != 1:
        return False
    kind = request.get("type")
    return isinstance(kind, str) and kind.lower() == "string"
