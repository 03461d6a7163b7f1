"""Gemini `generateContent` / `streamGenerateContent`: the adapter, over its request reading (`contents`)
and its response and stream reading (`output`).

Wire facts: wire-formats.md D and E.2.
"""

from __future__ import annotations

from runguard.proxy.core.events import Api, Provider, RequestInfo, ResponseInfo
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common.conversation import failed_request, tools_elsewhere
from runguard.proxy.providers.common.history import read_conversation
from runguard.proxy.providers.common.jsonish import as_dict, as_str, load_object, pick
from runguard.proxy.providers.common.stop import stop_text
from runguard.proxy.providers.gemini import replies as gemini_replies
from runguard.proxy.providers.gemini.contents import (
    keep_contents,
    output_schema_of,
    parts_of,
    read_contents,
    text_of_parts,
    tools_of,
)
from runguard.proxy.providers.gemini.output import Accumulator, GeminiStreamParser

__all__ = ["GeminiAdapter", "GeminiStreamParser"]


class GeminiAdapter:
    provider = Provider.GEMINI
    api = Api.GEMINI

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
            json_array_stream=ctx.json_array_stream,
            tools_elsewhere=tools_elsewhere(data),
        )

    def parse_response(self, body: bytes) -> ResponseInfo:
        data, problem = load_object(body)
        if data is None:
            return ResponseInfo(parse_error=problem)
        acc = Accumulator()
        acc.add(data)
        return acc.info(complete=True)

    def stream_parser(self) -> GeminiStreamParser:
        return GeminiStreamParser()

    def error_response(self, notice: StopNotice, *, stream: bool, status: int = 429) -> Synthetic:
        return gemini_replies.error_response(notice, status)

    def stop_response(self, notice: StopNotice, request: RequestInfo) -> Synthetic | None:
        text = stop_text(notice, request)
        if text is None:
            return None
        return gemini_replies.stop_response(
            request.model, text, stream=request.stream, json_array=request.json_array_stream
        )

    def stream_error_event(self, message: str, code: str) -> bytes:
        return gemini_replies.stream_error_event(message, code)
