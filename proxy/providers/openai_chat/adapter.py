"""OpenAI Chat Completions (`POST /v1/chat/completions`): requests, responses, streams.

Wire facts: wire-formats.md A. Tool-call deltas in a stream are keyed by
`index` and may interleave; usage comes in a last chunk only when the
request asked for `stream_options.include_usage`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runguard.proxy.core.events import Api, OutputSchema, Provider, RequestInfo, ResponseInfo, ToolCall, Usage
from runguard.proxy.providers.answers import StopNotice, Synthetic
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.common import media, openai_replies
from runguard.proxy.providers.common.adapting import Adapting
from runguard.proxy.providers.common.agent_tools import runs_an_agent
from runguard.proxy.providers.common.conversation import (
    Conversation,
    end_user_of,
    failed_request,
    last_index,
    tools_elsewhere,
)
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.providers.common.history import keep_turns, read_conversation
from runguard.proxy.providers.common.jsonish import (
    as_dict,
    as_int,
    as_list,
    as_str,
    dumps_text,
    opt_str,
    text_of,
)
from runguard.proxy.providers.common.sse import SseObjects


def call_fields(raw: Any) -> Iterator[tuple[str, str, str | None]]:
    """(name, arguments, call id) of each entry of a `tool_calls` list.

    Every earlier turn of a long conversation passes through here on every
    request, so the shape every SDK sends (a function with string name and
    arguments) is read directly; anything else goes through the forgiving path.
    """
    for item in as_list(raw):
        if type(item) is dict:
            function = item.get("function")
            if type(function) is dict:
                name, arguments, call_id = function.get("name"), function.get("arguments"), item.get("id")
                if type(name) is str and name and type(arguments) is str and type(call_id) is str and call_id:
                    yield name, arguments, call_id
                    continue
        yield call_fields_of(item)


def call_fields_of(item: Any) -> tuple[str, str, str | None]:
    """(name, arguments, call id) of one `tool_calls` entry, whatever its shape (custom tools too)."""
    entry = as_dict(item)
    function = as_dict(entry.get("function"))
    custom = as_dict(entry.get("custom"))
    name = as_str(function.get("name")) or as_str(custom.get("name"))
    return name, _arguments(function.get("arguments", custom.get("input"))), opt_str(entry.get("id"))


def _calls(raw: Any) -> list[ToolCall]:
    return [
        ToolCall(name, arguments, call_id, index) for index, (name, arguments, call_id) in enumerate(call_fields(raw))
    ]


def _is_assistant(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant"


def _arguments(raw: Any) -> str:
    """Arguments are a JSON string; some compatible servers send the object itself."""
    return dumps_text(raw) if isinstance(raw, (str, dict, list)) else ""


def _tools(tools: Any) -> tuple[tuple[str, ...], frozenset[str]]:
    """The names of the request's tools, and of those that run an agent."""
    names, agents = [], []
    for raw in as_list(tools):
        # The shape every SDK sends (a function with a string name) read directly, as `call_fields` does.
        function = raw.get("function") if type(raw) is dict else None
        if type(function) is dict and type(name := function.get("name")) is str and name:
            names.append(name)
            if runs_an_agent(function.get("parameters")):
                agents.append(name)
            continue
        tool = as_dict(raw)
        function = as_dict(tool.get("function"))
        name = as_str(function.get("name")) or as_str(as_dict(tool.get("custom")).get("name"))
        if name:
            names.append(name)
            if runs_an_agent(function.get("parameters")):
                agents.append(name)
    return tuple(names), frozenset(agents)


def _output_schema(response_format: Any) -> OutputSchema | None:
    fmt = as_dict(response_format)
    kind = fmt.get("type")
    if kind == "json_schema":
        spec = as_dict(fmt.get("json_schema"))
        return OutputSchema(as_dict(spec.get("schema")), as_str(spec.get("name")) or None)
    if kind == "json_object":
        return OutputSchema({}, None, "json_object")
    return None


def _usage(raw: Any, tier: Any) -> Usage | None:
    """A completion's or chunk's usage; `tier`: the service tier it names."""
    usage = as_dict(raw)
    if not usage:
        return None
    prompt, completion = as_dict(usage.get("prompt_tokens_details")), as_dict(usage.get("completion_tokens_details"))
    return Usage(
        input_tokens=as_int(usage.get("prompt_tokens")),
        output_tokens=as_int(usage.get("completion_tokens")),
        cached_tokens=as_int(prompt.get("cached_tokens")),
        reasoning_tokens=as_int(completion.get("reasoning_tokens")),
        service_tier=opt_str(tier),
        audio_input_tokens=as_int(prompt.get("audio_tokens")),
        audio_output_tokens=as_int(completion.get("audio_tokens")),
    )


def _error(data: dict[str, Any]) -> str | None:
    error = data.get("error")
    if not error:
        return None
    return as_str(as_dict(error).get("message")) or dumps_text(error)[:200]


class ChatStreamParser(SseObjects):
    """Accumulates a Chat Completions stream: text and tool calls of choice 0, finish, usage."""

    DONE = b"[DONE]"

    def __init__(self) -> None:
        super().__init__()
        self._text: list[str] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]
        self._id: str | None = None
        self._model: str | None = None
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._error: str | None = None

    def take(self, payload: dict[str, Any]) -> None:
        # Every event of a stream passes here (hundreds for a short answer): the lookups are written out
        # rather than through `jsonish`'s helpers, with the same reading (a field of the wrong type is absent).
        get = payload.get
        if get("error"):
            self._error = _error(payload)
            return
        if not self._id:
            self._id = opt_str(get("id"))
        if not self._model:
            self._model = opt_str(get("model"))
        usage = get("usage")
        if usage:
            self._usage = _usage(usage, get("service_tier"))
        choices = get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict) and delta:
                content, refusal = delta.get("content"), delta.get("refusal")  # a refusal is the model's answer too
                if isinstance(content, str):
                    self._text.append(content)
                if isinstance(refusal, str):
                    self._text.append(refusal)
                calls = delta.get("tool_calls")
                if isinstance(calls, list):
                    for piece in calls:
                        self._tool_delta(as_dict(piece))
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self._finish = finish

    def _tool_delta(self, piece: dict[str, Any]) -> None:
        slot = self._calls.setdefault(as_int(piece.get("index")), [None, "", []])
        slot[0] = opt_str(piece.get("id")) or slot[0]
        function = as_dict(piece.get("function"))
        slot[1] = opt_str(function.get("name")) or slot[1]
        if isinstance(function.get("arguments"), str):
            slot[2].append(function["arguments"])

    def close(self) -> ResponseInfo:
        self.rest()
        calls = tuple(
            ToolCall(name, "".join(pieces), call_id, index)
            for index, (call_id, name, pieces) in sorted(self._calls.items())
        )
        return ResponseInfo(
            response_id=self._id,
            model=self._model,
            text="".join(self._text),
            tool_calls=calls,
            handoffs=handoffs_of(calls),
            finish_reason=self._finish,
            usage=self._usage,
            error=self._error,
            complete=self.done or self._finish is not None,
            parse_error=self.unparsable,
        )


def read_messages(talk: Conversation, raw: Any) -> None:
    """Report the `messages` to `talk`, the ones before the last assistant turn first and in one pass."""
    messages = as_list(raw)
    tail = last_index(messages, _is_assistant)
    _count_earlier(talk, messages, 0, tail)
    _read_tail(talk, messages, max(tail, 0))


def keep_messages(talk: Conversation, messages: list[Any], resumed: bool) -> Conversation | None:
    """`read_messages`, and the conversation of all `messages` read as earlier turns (`history.ItemsReader`)."""
    return keep_turns(talk, messages, resumed, _is_assistant, _count_earlier, _read_tail)


def _count_earlier(talk: Conversation, messages: list[Any], start: int, stop: int) -> None:
    """Report `messages[start:stop]`, turns before the last assistant turn, in one pass.

    An agent loop resends its whole history with every request, so this loop
    is most of what a long conversation costs beyond its JSON parse. Assistant
    turns and tool results are only counted, locally, and reported at once
    (`Conversation.earlier_turns`): no `ToolCall`, no call into `talk`, no
    generator per message, and the tool calls of the shape every SDK sends
    read inline. The result is that of reading every message with
    `_read_message`, which a property test holds (its oracle:
    `tests/proxy/providers/common/forgiving.py`).
    """
    count = chars = turns = 0
    names: dict[str, str] = {}
    for index in range(start, stop):
        item = messages[index]
        message = item if type(item) is dict else {}
        role = message.get("role")
        if role == "assistant":
            count += 1
            turns += 1
            content = message.get("content")
            if content is not None:
                chars += len(content) if type(content) is str else len(text_of(content))
            calls = message.get("tool_calls")
            if not calls:
                continue
            for item in calls if type(calls) is list else ():
                function = item.get("function") if type(item) is dict else None
                if type(function) is dict:
                    name, arguments, call_id = function.get("name"), function.get("arguments"), item.get("id")
                    if type(name) is str and name and type(arguments) is str and type(call_id) is str and call_id:
                        chars += len(name) + len(arguments)
                        names[call_id] = name
                        continue
                name, arguments, call_id = call_fields_of(item)
                chars += len(name) + len(arguments)
                if call_id:
                    names[call_id] = name
        elif role in ("tool", "function"):
            count += 1
            content = message.get("content")
            chars += len(content) if type(content) is str else len(text_of(content))
        else:
            _read_message(talk, message, role, message.get("content"))
    talk.earlier_turns(count, chars, turns, names)  # all zero when there is no earlier turn


def _read_tail(talk: Conversation, messages: list[Any], start: int) -> None:
    for index in range(start, len(messages)):
        item = messages[index]
        message = item if type(item) is dict else {}
        _read_message(talk, message, message.get("role"), message.get("content"))


def _read_message(talk: Conversation, message: dict[str, Any], role: Any, content: Any) -> None:
    if role in ("system", "developer"):
        talk.system(text_of(content))
    elif role == "user":
        media.user_said(talk, text_of(content), content)
        talk.weigh(media.parts(content) * media.MEDIA_CHARS)
    elif role == "assistant":
        talk.assistant(len(text_of(content)), _calls(message.get("tool_calls")))
    elif role in ("tool", "function"):
        talk.result(opt_str(message.get("tool_call_id")), opt_str(message.get("name")), text_of(content))
    else:
        talk.other(len(text_of(content)))


def completion_info(data: dict[str, Any]) -> ResponseInfo:
    """A whole Chat completion's record."""
    choice = as_dict(next(iter(as_list(data.get("choices"))), None))
    message = as_dict(choice.get("message"))
    calls = tuple(_calls(message.get("tool_calls")))
    return ResponseInfo(
        response_id=opt_str(data.get("id")),
        model=opt_str(data.get("model")),
        text=text_of(message.get("content")) or as_str(message.get("refusal")),
        tool_calls=calls,
        handoffs=handoffs_of(calls),
        finish_reason=opt_str(choice.get("finish_reason")),
        usage=_usage(data.get("usage"), data.get("service_tier")),
        error=_error(data),
    )


class ChatAdapter(Adapting):
    provider = Provider.OPENAI
    api = Api.CHAT
    read_object = completion_info
    errors = openai_replies.error_response
    stream_error = openai_replies.stream_error_event

    def parse_request(self, body: bytes, ctx: RequestContext) -> RequestInfo:
        read = read_conversation(body, ctx.history, str(self.api), "messages", keep_messages, read_messages)
        if isinstance(read, str):
            return failed_request(self.api, read)
        data, talk = read
        stream = data.get("stream") is True
        include_usage = as_dict(data.get("stream_options")).get("include_usage") if stream else None
        tool_names, agent_tools = _tools(data.get("tools"))
        return talk.info(
            api=self.api,
            model=as_str(data.get("model")),
            stream=stream,
            agent_header=ctx.agent_header,
            session=ctx.session,
            client=ctx.client,
            tool_names=tool_names,
            agent_tools=agent_tools,
            output_schema=_output_schema(data.get("response_format")),
            include_usage=include_usage is True if stream else None,
            end_user=end_user_of(data),
            tools_elsewhere=tools_elsewhere(data),
        )

    def stream_parser(self) -> ChatStreamParser:
        return ChatStreamParser()

    def stop_answer(self, notice: StopNotice, request: RequestInfo, text: str) -> Synthetic:
        return openai_replies.chat_stop(
            notice, request.model, text, stream=request.stream, include_usage=bool(request.include_usage)
        )
