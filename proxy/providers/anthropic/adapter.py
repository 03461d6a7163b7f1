"""Anthropic Messages (`POST /v1/messages`): requests, responses, streams, synthetic answers.

The conversation is read in `messages`, responses and streams in `stream`,
the answers written in `replies`. Here: the request's other fields. `tools`
holds the client's tools (`name`, `input_schema`) and Anthropic's server
tools (`type` such as `web_search_20250305`, and a `name`). A JSON schema the
answer must satisfy comes from `output_config.format` (or the older beta
`output_format`), both `{"type": "json_schema", "schema": {...}}`; a
`tool_choice` that forces one tool (`{"type": "tool", "name": ...}`, or
`{"type": "any"}` with a single tool, or with pydantic-ai's output tool among
others: `final_result`, `final_result_<type>` for a union, which is how it
asks for a typed answer while its other tools stay callable) demands that
tool's input schema, and its name is kept on the schema: a stop must then be
a call of that tool.
`metadata.user_id` names the end user.

Message threads (beta `message-threads-2026-08-12`, the SDK's tool runner):
`thread: {"type": "continue", "previous_message_id": ...}` continues a
conversation Anthropic keeps, so the request carries only the new messages
(the tool results), as a Responses request with `previous_response_id` does;
the id is read into that field, and the proxy fills the results' names and
the run from the message it forwarded (`runs.continuation`).
"""

from __future__ import annotations

from typing import Any

from runguard.proxy.core.events import Api, OutputSchema, Provider, RequestInfo
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.anthropic import replies
from runguard.proxy.providers.anthropic.messages import keep_messages, read_messages, system_text
from runguard.proxy.providers.anthropic.stream import MessagesStreamParser, message_info
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common import sessions
from runguard.proxy.providers.common.adapting import Adapting
from runguard.proxy.providers.common.agent_tools import runs_an_agent
from runguard.proxy.providers.common.conversation import failed_request, tools_elsewhere
from runguard.proxy.providers.common.history import read_conversation
from runguard.proxy.providers.common.jsonish import as_dict, as_list, as_str, opt_str


def _tools(tools: Any) -> tuple[tuple[str, ...], frozenset[str], dict[str, dict[str, Any]]]:
    """The names of the request's tools, those that run an agent, and the client tools' input schemas."""
    names, agents, schemas = [], [], {}
    for raw in as_list(tools):
        tool = as_dict(raw)
        name = as_str(tool.get("name"))
        if not name:
            continue
        names.append(name)
        schema = tool.get("input_schema")
        if isinstance(schema, dict):
            schemas[name] = schema
            if runs_an_agent(schema):
                agents.append(name)
    return tuple(names), frozenset(agents), schemas


OUTPUT_TOOL = "final_result"  # pydantic-ai's output tool (`_output.DEFAULT_OUTPUT_TOOL_NAME`)


def _output_tool(schemas: dict[str, dict[str, Any]]) -> str | None:
    """The tool `{"type": "any"}` stands for: the only one, else pydantic-ai's output tool if declared."""
    if len(schemas) == 1:
        return next(iter(schemas))
    return next((name for name in schemas if name == OUTPUT_TOOL or name.startswith(OUTPUT_TOOL + "_")), None)


def _output_schema(data: dict[str, Any], schemas: dict[str, dict[str, Any]]) -> OutputSchema | None:
    for holder in (as_dict(as_dict(data.get("output_config")).get("format")), as_dict(data.get("output_format"))):
        if holder.get("type") == "json_schema" and isinstance(holder.get("schema"), dict):
            return OutputSchema(holder["schema"])
    choice = as_dict(data.get("tool_choice"))
    forced = opt_str(choice.get("name")) if choice.get("type") == "tool" else None
    if choice.get("type") == "any":
        forced = _output_tool(schemas)
    if forced is not None and forced in schemas:
        return OutputSchema(schemas[forced], forced)
    return None


ANTHROPIC = Provider("anthropic")
MESSAGES = Api("messages")


class AnthropicAdapter(Adapting):
    provider = ANTHROPIC
    api = MESSAGES
    read_object = message_info
    errors = replies.error_response
    stream_error = replies.stream_error_event

    def parse_request(self, body: bytes, ctx: RequestContext) -> RequestInfo:
        read = read_conversation(body, ctx.history, self.api.value, "messages", keep_messages, read_messages)
        if isinstance(read, str):
            return failed_request(self.api, read)
        data, talk = read
        system = data.get("system")
        if system is not None:
            talk.system(system_text(system), first=True)
        tool_names, agent_tools, schemas = _tools(data.get("tools"))
        user = as_dict(data.get("metadata")).get("user_id")
        thread = as_dict(data.get("thread"))
        continues = opt_str(thread.get("previous_message_id")) if thread.get("type") == "continue" else None
        return talk.info(
            api=self.api,
            model=as_str(data.get("model")),
            stream=data.get("stream") is True,
            agent_header=ctx.agent_header,
            tool_names=tool_names,
            agent_tools=agent_tools,
            output_schema=_output_schema(data, schemas),
            end_user=user if isinstance(user, str) and user else None,
            session=ctx.session or sessions.from_user_id(user),
            client=ctx.client,
            previous_response_id=continues,
            tools_elsewhere=tools_elsewhere(data),
        )

    def stream_parser(self) -> MessagesStreamParser:
        return MessagesStreamParser()

    def stop_answer(self, notice: StopNotice, request: RequestInfo, text: str) -> Synthetic:
        forced = request.output_schema.name if request.output_schema is not None else None
        return replies.stop_response(notice, request.model, text, stream=request.stream, forced_tool=forced)
