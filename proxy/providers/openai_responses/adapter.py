"""OpenAI Responses (`POST /v1/responses`): the adapter, over its request reading (`input`) and its
response and stream reading (`output`).

Wire facts: wire-formats.md B.
"""

from __future__ import annotations

import dataclasses

from runguard.proxy.core.events import Api, Provider, RequestInfo, digest
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common import openai_replies
from runguard.proxy.providers.common.adapting import Adapting
from runguard.proxy.providers.common.conversation import end_user_of, failed_request, tools_elsewhere
from runguard.proxy.providers.common.history import read_conversation
from runguard.proxy.providers.common.jsonish import as_str
from runguard.proxy.providers.openai_responses.input import (
    conversation_id,
    keep_input,
    output_schema_of,
    read_input,
    tools_of,
)
from runguard.proxy.providers.openai_responses.output import ResponsesStreamParser, response_info

# Read here by the sockets and the background polls, which predate the split.
__all__ = ["ResponsesAdapter", "ResponsesStreamParser", "response_info"]


class ResponsesAdapter(Adapting):
    provider = Provider.OPENAI
    api = Api.RESPONSES
    read_object = response_info
    errors = openai_replies.error_response
    stream_error = openai_replies.responses_stream_error

    def parse_request(self, body: bytes, ctx: RequestContext) -> RequestInfo:
        read = read_conversation(body, ctx.history, str(self.api), "input", keep_input, read_input)
        if isinstance(read, str):
            return failed_request(self.api, read)
        data, talk = read
        instructions = data.get("instructions")
        if isinstance(instructions, str):
            talk.system(instructions, first=True)
        previous = data.get("previous_response_id")
        tool_names, agent_tools = tools_of(data.get("tools"))
        info = talk.info(
            api=self.api,
            model=as_str(data.get("model")),
            stream=data.get("stream") is True,
            agent_header=ctx.agent_header,
            session=ctx.session,
            client=ctx.client,
            tool_names=tool_names,
            agent_tools=agent_tools,
            output_schema=output_schema_of(data.get("text")),
            previous_response_id=previous if isinstance(previous, str) and previous else None,
            end_user=end_user_of(data),
            tools_elsewhere=tools_elsewhere(data),
        )
        if data.get("background") is True:
            info = dataclasses.replace(info, background=True)
        conversation = conversation_id(data.get("conversation"))
        if conversation is None:
            return info
        # The server keeps the conversation: a step's input holds only its new items (tool outputs, no
        # user message), so the conversation, not its first message, is the root that groups the run.
        return dataclasses.replace(info, root_hash=digest("conversation\x00" + conversation))

    def stream_parser(self) -> ResponsesStreamParser:
        return ResponsesStreamParser()

    def stop_answer(self, notice: StopNotice, request: RequestInfo, text: str) -> Synthetic:
        return openai_replies.responses_stop(notice, request.model, text, stream=request.stream)
