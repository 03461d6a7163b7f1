"""Gemini `generateContent` / `streamGenerateContent`: requests, responses, streams.

Wire facts: wire-formats.md D and E.2. Requests may mix camelCase and
snake_case keys (ADK does), so every read accepts both. Roles are only
`user` and `model`; tool results sit in a user turn as `functionResponse`
parts, usually without ids (paired by name and order). Stream chunks are
deltas; `usageMetadata` is cumulative, so the last one counts. Without
`alt=sse` the stream is one JSON array sent in pieces.
"""

from __future__ import annotations

from typing import Any

import orjson

from runguard.proxy.core.events import Api, OutputSchema, Provider, RequestInfo, ResponseInfo, ToolCall, Usage
from runguard.proxy.providers.base import RequestContext, StopNotice, Synthetic
from runguard.proxy.providers.common import media
from runguard.proxy.providers.common.agent_tools import runs_an_agent
from runguard.proxy.providers.common.conversation import Conversation, failed_request, last_index
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.providers.common.history import keep_turns, read_conversation
from runguard.proxy.providers.common.jsonish import (
    JsonArrayItems,
    as_dict,
    as_int,
    as_list,
    as_str,
    dumped_length,
    dumps_text,
    load_object,
    opt_str,
    pick,
)
from runguard.proxy.providers.common.sse import SseSplitter
from runguard.proxy.providers.common.stop import stop_text
from runguard.proxy.providers.gemini import replies as gemini_replies

SET_MODEL_RESPONSE = "set_model_response"  # the tool ADK declares for an output schema next to other tools


def _parts(content: Any) -> list[dict[str, Any]]:
    return [as_dict(part) for part in as_list(as_dict(content).get("parts"))]


def _text(parts: list[dict[str, Any]], *, thoughts: bool = False) -> str:
    return "".join(as_str(p.get("text")) for p in parts if thoughts or not p.get("thought"))


def _calls(parts: list[dict[str, Any]], start: int = 0) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for part in parts:
        call = as_dict(pick(part, "functionCall", "function_call"))
        if call:
            calls.append(ToolCall(*_call_fields(call), start + len(calls)))
    return calls


def _call_fields(call: dict[str, Any]) -> tuple[str, str, str | None]:
    """(name, arguments, call id) of a `functionCall`."""
    args = call.get("args")
    return as_str(call.get("name")), dumps_text(args if args is not None else {}), opt_str(call.get("id"))


def _is_model(content: Any) -> bool:
    return isinstance(content, dict) and content.get("role") == "model"


def read_contents(talk: Conversation, contents: Any) -> None:
    """Report the `contents` to `talk`, the ones before the last model turn first and in one pass."""
    listed = as_list(contents)
    tail = max(last_index(listed, _is_model), 0)
    _count_earlier(talk, listed, 0, tail)
    _read_tail(talk, listed, tail)


def keep_contents(talk: Conversation, listed: list[Any], resumed: bool) -> Conversation | None:
    """`read_contents`, and the conversation of all contents read as earlier turns (`history.ItemsReader`)."""
    return keep_turns(talk, listed, resumed, _is_model, _count_earlier, _read_tail)


def _count_earlier(talk: Conversation, listed: list[Any], start: int, stop: int) -> None:
    """Report `listed[start:stop]`, contents before the last model turn, in one pass.

    An agent loop resends its whole history with every request, so this loop
    is most of what a long conversation costs beyond its JSON parse. Model
    turns and tool results are only counted, locally, and reported at once
    (`Conversation.earlier_turns`): no `ToolCall` or part list built, no call
    into `talk` but for user text. The result is `read_contents_forgiving`'s,
    which a property test holds.
    """
    count = chars = turns = 0
    names: dict[str, str] = {}
    for index in range(start, stop):
        raw = listed[index]
        content = raw if type(raw) is dict else {}
        parts = content.get("parts")
        parts = parts if type(parts) is list else []
        if content.get("role") == "model":
            count += 1
            turns += 1
            chars += _count_model_turn(parts, names)
            continue
        results, results_chars, text = _count_user_turn(parts)
        count += results
        chars += results_chars + media.inline_parts(parts) * media.MEDIA_CHARS
        if text or not results:
            media.user_said(talk, text, content.get("parts"))
    talk.earlier_turns(count, chars, turns, names)  # all zero when there is no earlier turn


def _read_tail(talk: Conversation, listed: list[Any], start: int) -> None:
    for index in range(start, len(listed)):
        _read_content(talk, listed[index], earlier=False)


def _count_model_turn(parts: list[Any], names: dict[str, str]) -> int:
    """The characters of an earlier model turn's parts (text and calls); its call ids' names go to `names`."""
    chars = 0
    for part in parts:
        if type(part) is not dict:
            continue
        text, call = part.get("text"), part.get("functionCall")
        if type(text) is str:
            chars += len(text)
        if call is None:
            call = part.get("function_call")  # as `pick` reads it
        if type(call) is dict and call:
            name, args, call_id = as_str(call.get("name")), call.get("args"), opt_str(call.get("id"))
            chars += len(name) + dumped_length(args if args is not None else {})
            if call_id:
                names[call_id] = name
    return chars


def _count_user_turn(parts: list[Any]) -> tuple[int, int, str]:
    """An earlier user turn: (its tool results, their characters, its text)."""
    texts: list[str] = []
    results = chars = 0
    for part in parts:
        if type(part) is not dict:
            continue
        text, response = part.get("text"), part.get("functionResponse")
        if type(text) is str:
            texts.append(text)
        if response is None:
            response = part.get("function_response")  # as `pick` reads it
        if type(response) is dict and response:
            results += 1
            chars += dumped_length(response.get("response"))
    return results, chars, "".join(texts)


def read_contents_forgiving(talk: Conversation, contents: Any) -> None:
    """Report the `contents` to `talk`, every one through the forgiving `_read_content`."""
    listed = as_list(contents)
    tail = last_index(listed, _is_model)
    for position, raw in enumerate(listed):
        _read_content(talk, raw, earlier=position < tail)


def _read_content(talk: Conversation, raw: Any, *, earlier: bool) -> None:
    """Report one content, whatever its shape; `earlier`: before the last model turn."""
    content = as_dict(raw)
    parts = _parts(content)
    if content.get("role") == "model":
        talk.assistant(len(_text(parts, thoughts=True)), _calls(parts))
        return
    answered = False
    for part in parts:
        response = as_dict(pick(part, "functionResponse", "function_response"))
        if response and earlier:
            talk.earlier_result(len(dumps_text(response.get("response"))))
            answered = True
        elif response:
            value = response.get("response")
            structured = value if isinstance(value, dict | list) else None
            talk.result(opt_str(response.get("id")), opt_str(response.get("name")), dumps_text(value), structured)
            answered = True
    text = _text(parts, thoughts=True)
    if text or not answered:
        media.user_said(talk, text, content.get("parts"))
    talk.weigh(media.inline_parts(parts) * media.MEDIA_CHARS)


def _tools(tools: Any) -> tuple[tuple[str, ...], frozenset[str]]:
    """The names of the request's functions and built-in tools (by their key), and of the functions that
    run an agent."""
    names, agents = [], []
    for raw in as_list(tools):
        tool = as_dict(raw)
        for declared in as_list(pick(tool, "functionDeclarations", "function_declarations")):
            declaration = as_dict(declared)
            name = as_str(declaration.get("name"))
            if not name:
                continue
            names.append(name)
            get = declaration.get
            if runs_an_agent(get("parametersJsonSchema") or get("parameters") or get("parameters_json_schema")):
                agents.append(name)
        names += [key for key in tool if key not in ("functionDeclarations", "function_declarations")]
    return tuple(names), frozenset(agents)


def _output_schema(config: dict[str, Any], tools: Any) -> OutputSchema | None:
    json_schema = pick(config, "responseJsonSchema", "response_json_schema")
    if isinstance(json_schema, dict):
        return OutputSchema(json_schema)
    openapi = pick(config, "responseSchema", "response_schema")
    if isinstance(openapi, dict):
        return OutputSchema(openapi, dialect="openapi")
    if pick(config, "responseMimeType", "response_mime_type") == "application/json":
        return OutputSchema({}, None, "json_object")
    return _set_model_response_schema(tools)


def _set_model_response_schema(tools: Any) -> OutputSchema | None:
    """The output schema of an ADK agent that also has tools.

    ADK cannot ask Gemini for a response schema and tools at once, so it sends
    the schema as the parameters of a `set_model_response` tool, tells the
    model to answer through it, and takes a plain-text answer as the final
    response too. A stop must then be JSON of that schema, as with `responseSchema`.
    """
    for raw in as_list(tools):
        for declaration in as_list(pick(as_dict(raw), "functionDeclarations", "function_declarations")):
            found = as_dict(declaration)
            if found.get("name") != SET_MODEL_RESPONSE:
                continue
            json_schema = pick(found, "parametersJsonSchema", "parameters_json_schema")
            if isinstance(json_schema, dict):
                return OutputSchema(json_schema, SET_MODEL_RESPONSE)
            openapi = found.get("parameters")
            if isinstance(openapi, dict):
                return OutputSchema(openapi, SET_MODEL_RESPONSE, "openapi")
    return None


def _usage(raw: Any) -> Usage | None:
    usage = as_dict(raw)
    if not usage:
        return None
    thoughts = as_int(usage.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=as_int(usage.get("promptTokenCount")) + as_int(usage.get("toolUsePromptTokenCount")),
        output_tokens=as_int(usage.get("candidatesTokenCount")) + thoughts,
        cached_tokens=as_int(usage.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
        audio_input_tokens=_audio(usage.get("promptTokensDetails")),
        audio_output_tokens=_audio(usage.get("candidatesTokensDetails")),
        cached_audio_tokens=_audio(usage.get("cacheTokensDetails")),
    )


def _audio(details: Any) -> int:
    """The audio tokens of a usage breakdown by modality (`[{"modality": "AUDIO", "tokenCount": N}, ...]`)."""
    if type(details) is not list:
        return 0
    return sum(
        as_int(part.get("tokenCount")) for part in details if type(part) is dict and part.get("modality") == "AUDIO"
    )


def _error(data: dict[str, Any]) -> str | None:
    error = data.get("error")
    if not error:
        return None
    error = as_dict(error)
    return as_str(error.get("message")) or as_str(error.get("status")) or "error"


class _Accumulator:
    """Adds up response chunks (or one whole response) into a `ResponseInfo`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.finish: str | None = None
        self.usage_metadata: dict[str, Any] = {}  # the last non-empty one: cumulative, read at the end
        self.ident: str | None = None
        self.model: str | None = None
        self.error: str | None = None

    def add(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if data.get("error"):
            self.error = _error(data)
            return
        candidate = as_dict(next(iter(as_list(data.get("candidates"))), None))
        parts = _parts(candidate.get("content"))
        self.text.append(_text(parts))
        self.calls += _calls(parts, len(self.calls))
        if isinstance(candidate.get("finishReason"), str):
            self.finish = candidate["finishReason"]
        blocked = as_dict(data.get("promptFeedback")).get("blockReason")
        if isinstance(blocked, str):
            self.finish = blocked
        usage = data.get("usageMetadata")
        if isinstance(usage, dict) and usage:
            self.usage_metadata = usage
        self.ident = opt_str(data.get("responseId")) or self.ident
        self.model = opt_str(data.get("modelVersion")) or self.model

    def info(self, *, complete: bool, parse_error: str | None = None) -> ResponseInfo:
        calls = tuple(self.calls)
        return ResponseInfo(
            response_id=self.ident,
            model=self.model,
            text="".join(self.text),
            tool_calls=calls,
            handoffs=handoffs_of(calls),
            finish_reason=self.finish,
            usage=_usage(self.usage_metadata),
            error=self.error,
            complete=complete,
            parse_error=parse_error,
        )


class GeminiStreamParser:
    """SSE chunks (`alt=sse`), a JSON array streamed in pieces (each item read once it closes),
    or a bare JSON object (an error body sent on the streaming method, read at the end)."""

    def __init__(self) -> None:
        self._sse = SseSplitter()
        self._acc = _Accumulator()
        self._array: JsonArrayItems | None = None
        self._object: bytearray | None = None
        self._started = False
        self._bad = 0

    def feed(self, chunk: bytes) -> None:
        if not self._started:
            stripped = chunk.lstrip()
            if not stripped:
                return
            self._started = True
            if stripped.startswith(b"["):
                self._array = JsonArrayItems()
            elif stripped.startswith(b"{"):
                self._object = bytearray()
        if self._array is not None:
            for item in self._array.feed(chunk):
                self._event(item)
        elif self._object is not None:
            self._object += chunk
        else:
            for event in self._sse.feed(chunk):
                self._event(event.data)

    def _event(self, data: bytes) -> None:
        try:
            self._acc.add(orjson.loads(data))
        except orjson.JSONDecodeError:
            self._bad += 1

    def close(self) -> ResponseInfo:
        if self._object is not None:
            self._event(bytes(self._object))
        elif self._array is None:
            for event in self._sse.rest():
                self._event(event.data)
        problem = f"{self._bad} unparsable chunks" if self._bad else None
        return self._acc.info(complete=self._acc.finish is not None, parse_error=problem)


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
            talk.system(_text(_parts(system)) if isinstance(system, dict) else as_str(system), first=True)
        model = (ctx.path_model or as_str(data.get("model"))).removeprefix("models/")
        config = as_dict(pick(data, "generationConfig", "generation_config"))
        tool_names, agent_tools = _tools(data.get("tools"))
        return talk.info(
            api=self.api,
            model=model,
            stream=ctx.stream_hint,
            ctx=ctx,
            tool_names=tool_names,
            agent_tools=agent_tools,
            output_schema=_output_schema(config, data.get("tools")),
            json_array_stream=ctx.json_array_stream,
        )

    def parse_response(self, body: bytes) -> ResponseInfo:
        data, problem = load_object(body)
        if data is None:
            return ResponseInfo(parse_error=problem)
        acc = _Accumulator()
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
