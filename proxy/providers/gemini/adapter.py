"""Gemini `generateContent` / `streamGenerateContent`: the adapter, over its request reading (`contents`)
and its response and stream reading (`output`).

Wire facts: wire-formats.md D and E.2.
"""

from __future__ import annotations

from runguard.proxy.core.events import Api, Provider, RequestInfo
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.adapting import Adapting
from runguard.proxy.providers.common.conversation import failed_request, tools_elsewhere
from runguard.proxy.providers.common.history import read_conversation
from runguard.proxy.providers.common.jsonish import as_dict, as_str, pick
from runguard.proxy.providers.gemini import replies as gemini_replies
from runguard.proxy.providers.gemini.contents import (
    keep_contents,
    output_schema_of,
    parts_of,
    read_contents,
    text_of_parts,
    tools_of,
)
from runguard.proxy.providers.gemini.output import GeminiStreamParser, response_info

__all__ = ["GeminiAdapter", "GeminiArrayAdapter", "GeminiStreamParser"]


class GeminiAdapter(Adapting):
    provider = Provider.GEMINI
    api = Api.GEMINI
    json_array = False  # streams are SSE (`alt=sse`); `GeminiArrayAdapter` writes for JSON-array ones
    read_object = response_info
    errors = gemini_replies.error_response
    stream_error = gemini_replies.stream_error_event

    def parse_request(self, body: bytes, ctx: RequestContext) -> RequestInfo:
        read = read_conversation(body, ctx.history, str(self.api), "contents", keep_contents, read_contents)
        if isinstance(read, str):
            return failed_request(self.api, read)
        data, talk = read
        system = pick(data, "systemInstruction", "system_instruction")
        if system is not None:
            talk.system(text_of_parts(parts_of(system)) if isinstance(system, dict) else as_str(system), first=True)
        model = (ctx.path_model or as_str(data.get("model"))).removeprefix("models/")
        config = as_dict(pick(data, "generationConfig", "generation_config"))
        tool_names, agent_tools = tools_of(data.get("tools"))
        return talk.info(
            api=self.api,
            model=model,
            stream=ctx.stream_hint,
            agent_header=ctx.agent_header,
            session=ctx.session,
            client=ctx.client,
            tool_names=tool_names,
            agent_tools=agent_tools,
            output_schema=output_schema_of(config, data.get("tools")),
            tools_elsewhere=tools_elsewhere(data),
        )

    def stream_parser(self) -> GeminiStreamParser:
        return GeminiStreamParser()

    def stop_answer(self, notice: StopNotice, request: RequestInfo, text: str) -> Synthetic:
        return gemini_replies.stop_response(request.model, text, stream=request.stream, json_array=self.json_array)

    def arrayed(self) -> GeminiAdapter:
        """This adapter for a stream framed as one JSON array (`json_array.JSON_ARRAY`)."""
        return GeminiArrayAdapter()


class GeminiArrayAdapter(GeminiAdapter):
    """The adapter of a stream framed as one JSON array (`json_array.JSON_ARRAY`): its stop answer is a
    one-item array, and the error that ends a stream early one more element."""

    json_array = True
    stream_error = gemini_replies.stream_error_element

    def arrayed(self) -> GeminiAdapter:
        return self
