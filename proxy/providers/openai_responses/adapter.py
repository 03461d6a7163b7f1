"""OpenAI Responses (`POST /v1/responses`): requests, responses, streams.

Wire facts: wire-formats.md B. Input is a string or a list of items; an
assistant turn is a run of consecutive output items (messages, function
calls, reasoning). With `previous_response_id` the input holds only the new
items: the guard fills tool-result names from what it remembered about that
response. Streams are typed events; `response.completed` carries the whole
response with its usage.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from runguard.proxy.core.events import Api, OutputSchema, Provider, RequestInfo, ResponseInfo, ToolCall, Usage, digest
from runguard.proxy.providers.base import RequestContext, StopNotice, Synthetic
from runguard.proxy.providers.common import media, openai_replies
from runguard.proxy.providers.common.agent_tools import runs_an_agent
from runguard.proxy.providers.common.conversation import Conversation, end_user_of, failed_request, last_index
from runguard.proxy.providers.common.handoffs import handoffs_of
from runguard.proxy.providers.common.history import read_conversation
from runguard.proxy.providers.common.jsonish import (
    as_dict,
    as_int,
    as_list,
    as_str,
    dumped_length,
    dumps_text,
    load_object,
    opt_str,
    text_of,
)
from runguard.proxy.providers.common.sse import SseSplitter
from runguard.proxy.providers.common.stop import stop_text

# Built-in tools the agent runs itself, as it runs function tools (openai-agents' ShellTool,
# LocalShellTool, ApplyPatchTool): the call names no tool (its tool is named by its type, as in
# `tools`), and its arguments are an object under another key.
_BUILTIN_CALLS = {
    "shell_call": ("shell", "action"),
    "local_shell_call": ("local_shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
}
_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", *_BUILTIN_CALLS})
_ASSISTANT_ITEMS = _CALL_ITEMS | {"reasoning"}
_OUTPUT_ITEMS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "shell_call_output",
        "local_shell_call_output",
        "apply_patch_call_output",
    }
)
# Tools OpenAI runs itself and bills per call, by their output item: a web search that opens a page or
# finds in one is a step of a search, not another.
_BILLED_CALLS = {"web_search_call": "web_search", "file_search_call": "file_search"}
_TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})
# A Response object's `status` once it will change no more (a background response is polled until then).
FINAL_STATUSES = frozenset({"completed", "incomplete", "failed", "cancelled"})


def _arguments(item: dict[str, Any]) -> Any:
    """A call item's arguments as the wire has them (None when absent): a JSON string, a custom
    tool's raw input, or a built-in tool's action object."""
    builtin = _BUILTIN_CALLS.get(as_str(item.get("type")))
    if builtin is not None:
        return item.get(builtin[1])
    return item.get("arguments", item.get("input"))


def _call(item: dict[str, Any], index: int) -> ToolCall:
    arguments = _arguments(item)
    call_id = opt_str(item.get("call_id")) or opt_str(item.get("id"))
    builtin = _BUILTIN_CALLS.get(as_str(item.get("type")))
    name = builtin[0] if builtin is not None else as_str(item.get("name"))
    return ToolCall(name, dumps_text("" if arguments is None else arguments), call_id, index)


def _is_assistant(raw: Any) -> bool:
    if not isinstance(raw, dict):
        return False
    kind = raw.get("type", "message")
    if kind == "message":
        return bool(raw.get("role") == "assistant")
    return isinstance(kind, str) and kind in _ASSISTANT_ITEMS


def read_input(talk: Conversation, items: Any) -> None:
    """Report the `input` items to `talk`, the items of finished turns first and fast.

    An agent loop resends its whole history with every request; only the last
    assistant turn needs `ToolCall`s, so the turns before it go through
    `_read_finished` (usual shapes counted in one pass, no `ToolCall` built).
    The result is the same as `read_input_forgiving`'s, which a property test holds.
    """
    if isinstance(items, str):
        talk.user(items)
        return
    listed = as_list(items)
    tail = last_index(listed, _is_assistant)
    finished = _finished(listed, tail)
    _read_finished(talk, listed, 0, finished)
    _read_rest(talk, listed, finished, tail)


def keep_input(talk: Conversation, listed: list[Any], resumed: bool) -> Conversation | None:
    """`read_input`, and the conversation of all items read as finished turns (`history.ItemsReader`)."""
    tail = last_index(listed, _is_assistant)
    if resumed:
        if tail < 0:
            return None
        start = _turn_start(listed, tail)
        if start is None and talk.in_assistant:  # the last turn began among the items before these
            return None
        # With no assistant item since the last user message or tool result before these items, reading
        # those that follow that one as finished (as the checkpoint did) reads them as `_read_item` would.
        finished = start or 0
    else:
        finished = _finished(listed, tail)
    _read_finished(talk, listed, 0, finished)
    kept = talk.copy()
    _read_finished(kept, listed, finished, len(listed))
    _read_rest(talk, listed, finished, tail)
    return kept


def _finished(listed: list[Any], tail: int) -> int:
    """How many leading items belong to finished turns (a one-step request skips the scan)."""
    return (_turn_start(listed, tail) or 0) if tail > 1 else 0


def _read_rest(talk: Conversation, listed: list[Any], start: int, tail: int) -> None:
    for position in range(start, len(listed)):
        _read_item(talk, listed[position], earlier=position < tail)


def read_input_forgiving(talk: Conversation, items: Any) -> None:
    """Report the `input` items to `talk`, every one through the forgiving `_read_item`."""
    if isinstance(items, str):
        talk.user(items)
        return
    listed = as_list(items)
    tail = last_index(listed, _is_assistant)
    for position, raw in enumerate(listed):
        _read_item(talk, raw, earlier=position < tail)


def _turn_start(listed: list[Any], tail: int) -> int | None:
    """The last user message or tool result before the last assistant turn (`tail`); None if none.

    Consecutive assistant items make one turn, so the last turn may begin
    before `tail`, but not before the last user message or tool result
    preceding it: those end a turn (see `_read_item`). The items before that
    one belong to finished turns.
    """
    for index in range(tail - 1, -1, -1):
        raw = listed[index]
        if not isinstance(raw, dict):
            return index  # read as an empty user message
        kind = raw.get("type", "message")
        if kind == "message" and raw.get("role") not in ("system", "developer", "assistant"):
            return index
        if isinstance(kind, str) and kind in _OUTPUT_ITEMS:
            return index
    return None


def _read_finished(talk: Conversation, listed: list[Any], start: int, stop: int) -> None:
    """Read the items of finished turns (`listed[start:stop]`) the way `_read_item` would, in one pass.

    This loop is most of what a long conversation costs beyond its JSON parse,
    so the shapes every SDK sends are counted locally and reported at once
    (`Conversation.earlier_turns`): a function call with string name, arguments
    and call id, a string output, assistant messages and reasoning. Consecutive
    assistant items make one turn. Anything else goes to `_read_item`, the
    counts so far handed over first.
    """
    if start >= stop:
        return
    count = chars = turns = 0
    names: dict[str, str] = {}
    in_assistant = talk.in_assistant
    for index in range(start, stop):
        item = listed[index]
        kind = item.get("type", "message") if type(item) is dict else None
        said: int | None = None  # the characters of an assistant item of a usual shape
        if kind == "function_call":
            name, arguments, call_id = item.get("name"), item.get("arguments"), item.get("call_id")
            if type(name) is str and type(arguments) is str and type(call_id) is str and call_id:
                said = len(name) + len(arguments)
                names[call_id] = name
        elif kind == "function_call_output":
            output = item.get("output")
            if type(output) is str:
                count += 1
                chars += len(output)
                in_assistant = False
                continue
        elif kind == "message" and item.get("role") == "assistant":
            said = len(text_of(item.get("content")))
        elif kind == "reasoning":
            said = dumped_length(item.get("summary", ""))
        if said is not None:  # a new turn unless it continues one
            count += 1
            chars += said
            if not in_assistant:
                turns += 1
                in_assistant = True
            continue
        # Any other shape the forgiving way, the counts so far handed over first.
        talk.earlier_turns(count, chars, turns, names, in_assistant=in_assistant)
        count = chars = turns = 0
        names = {}
        _read_item(talk, item, earlier=True)
        in_assistant = talk.in_assistant
    talk.earlier_turns(count, chars, turns, names, in_assistant=in_assistant)


def _read_item(talk: Conversation, raw: Any, *, earlier: bool) -> None:
    """Report one input item, whatever its shape; `earlier`: before the last assistant item."""
    item = as_dict(raw)
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        talk.other()
    elif kind == "message":
        content = item.get("content")
        role, text = item.get("role"), text_of(content)
        if role in ("system", "developer"):
            talk.system(text)
        elif role == "assistant":
            talk.assistant(len(text), continues=True)
        else:
            media.user_said(talk, text, content)
            talk.weigh(media.parts(content) * media.MEDIA_CHARS)
    elif kind in _ASSISTANT_ITEMS:
        calls = [_call(item, 0)] if kind != "reasoning" else []
        talk.assistant(len(dumps_text(item.get("summary", ""))) if not calls else 0, calls, continues=True)
    elif kind in _OUTPUT_ITEMS:
        text, weight = _output(item.get("output"))
        if earlier:
            talk.earlier_result(len(text) + weight)
        else:
            # A local shell output names its call by `id` (its API type); openai-agents sends `call_id`.
            talk.result(opt_str(item.get("call_id")) or opt_str(item.get("id")), None, text)
            talk.weigh(weight)
    elif kind != "item_reference":
        light, inline = media.shed(item)  # a computer-use screenshot, a generated image
        talk.other(len(dumps_text(light)) + inline * media.MEDIA_CHARS)
    else:
        talk.other()


def _output(output: Any) -> tuple[str, int]:
    """A tool output as the detectors read it, and what its media weigh in the input estimate beyond that
    text: a list of content parts with media (a screenshot tool's `input_image`) reads as its parts, each
    payload as its digest, and each media part weighs `media.MEDIA_CHARS`."""
    if isinstance(output, str):
        return output, 0
    light, inline = media.shed(output)
    listed = media.parts(output)
    if not (inline or listed):
        return text_of(output) or dumps_text(output), 0
    return dumps_text(light), max(inline, listed) * media.MEDIA_CHARS


def _conversation_id(value: Any) -> str | None:
    """The server-side conversation a request continues: an id, or an object with one."""
    return opt_str(value) or opt_str(as_dict(value).get("id"))


def _tools(tools: Any) -> tuple[tuple[str, ...], frozenset[str]]:
    """The names of the request's tools (a built-in one by its type), and of those that run an agent."""
    names, agents = [], []
    for raw in as_list(tools):
        tool = as_dict(raw)
        name = tool.get("name") if tool.get("type") in ("function", "custom") else tool.get("type")
        if isinstance(name, str) and name:
            names.append(name)
            if runs_an_agent(tool.get("parameters")):
                agents.append(name)
    return tuple(names), frozenset(agents)


def _output_schema(text: Any) -> OutputSchema | None:
    fmt = as_dict(as_dict(text).get("format"))
    if fmt.get("type") == "json_schema":
        return OutputSchema(as_dict(fmt.get("schema")), as_str(fmt.get("name")) or None)
    if fmt.get("type") == "json_object":
        return OutputSchema({}, None, "json_object")
    return None


def _usage(raw: Any, billed: dict[str, int], tier: Any) -> Usage | None:
    """A Response's usage; `billed`: its hosted calls by tool; `tier`: the service tier it names."""
    usage = as_dict(raw)
    if not usage:
        return None
    return Usage(
        input_tokens=as_int(usage.get("input_tokens")),
        output_tokens=as_int(usage.get("output_tokens")),
        cached_tokens=as_int(as_dict(usage.get("input_tokens_details")).get("cached_tokens")),
        reasoning_tokens=as_int(as_dict(usage.get("output_tokens_details")).get("reasoning_tokens")),
        tool_calls=tuple(billed.items()) if billed else (),
        service_tier=opt_str(tier),
    )


def _bill(billed: dict[str, int], item: dict[str, Any], kind: str) -> None:
    tool = _BILLED_CALLS[kind]
    if kind == "web_search_call" and as_dict(item.get("action")).get("type", "search") != "search":
        return
    billed[tool] = billed.get(tool, 0) + 1


def _error_text(data: dict[str, Any]) -> str | None:
    error = data.get("error")
    if isinstance(error, dict):
        return as_str(error.get("message")) or as_str(error.get("code")) or "error"
    if data.get("status") == "failed":
        return "response failed"
    return None


def response_info(data: dict[str, Any], *, complete: bool = True) -> ResponseInfo:
    """A whole Response object (a body, or the one `response.completed` carries)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    billed: dict[str, int] = {}
    for raw in as_list(data.get("output")):
        item = as_dict(raw)
        kind = as_str(item.get("type"))
        if kind == "message":
            texts.append(text_of(item.get("content")))
        elif kind in _CALL_ITEMS:
            calls.append(_call(item, len(calls)))
        elif kind in _BILLED_CALLS:
            _bill(billed, item, kind)
    status = data.get("status")
    return ResponseInfo(
        response_id=opt_str(data.get("id")),
        model=opt_str(data.get("model")),
        text="".join(texts),
        tool_calls=tuple(calls),
        handoffs=handoffs_of(calls),
        finish_reason=opt_str(status),
        usage=_usage(data.get("usage"), billed, data.get("service_tier")),
        error=_error_text(data),
        complete=complete,
    )


class ResponsesStreamParser:
    """Follows the typed events; the terminal event's full response wins when it comes."""

    def __init__(self) -> None:
        self._sse = SseSplitter()
        self._final: ResponseInfo | None = None
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._calls: dict[int, list[Any]] = {}  # output_index -> [call_id, name, argument pieces]
        self._error: str | None = None
        self._bad = 0

    def feed(self, chunk: bytes) -> None:
        for event in self._sse.feed(chunk):
            self._event(event.data)

    def _event(self, data: bytes) -> None:
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._bad += 1
            return
        self.take(payload)

    def take(self, payload: Any) -> None:
        """One event, parsed (a WebSocket frame carries one: see `ws_responses`)."""
        if not isinstance(payload, dict):
            return
        kind = payload.get("type")
        if not isinstance(kind, str):
            return
        if kind in _TERMINAL:
            self._final = response_info(as_dict(payload.get("response")), complete=kind != "response.failed")
        elif kind == "error":
            # An SSE error event names its problem at the top; a WebSocket error frame under `error`.
            nested = as_dict(payload.get("error"))
            found = payload.get("message") or payload.get("code") or nested.get("message") or nested.get("code")
            self._error = as_str(found) or "error"
        elif kind == "response.created":
            response = as_dict(payload.get("response"))
            self._id, self._model = opt_str(response.get("id")), opt_str(response.get("model"))
        elif kind == "response.output_text.delta":
            self._text.append(as_str(payload.get("delta")))
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = as_dict(payload.get("item"))
            if as_str(item.get("type")) in _CALL_ITEMS:
                slot = self._calls.setdefault(as_int(payload.get("output_index")), [None, "", []])
                call = _call(item, 0)
                slot[0], slot[1] = call.call_id or slot[0], call.name or slot[1]
                if kind.endswith(".done") and _arguments(item) is not None:
                    slot[2] = [call.arguments]
        elif kind == "response.function_call_arguments.delta":
            slot = self._calls.setdefault(as_int(payload.get("output_index")), [None, "", []])
            slot[2].append(as_str(payload.get("delta")))

    def close(self) -> ResponseInfo:
        for event in self._sse.rest():
            self._event(event.data)
        problem = f"{self._bad} unparsable events" if self._bad else None
        if self._final is not None:
            info = self._final
            if self._error and not info.error:
                info = dataclasses.replace(info, error=self._error)
            return dataclasses.replace(info, parse_error=problem) if problem else info
        calls = tuple(
            ToolCall(name, "".join(pieces), call_id, position)
            for position, (call_id, name, pieces) in enumerate(v for _, v in sorted(self._calls.items()))
        )
        return ResponseInfo(
            response_id=self._id,
            model=self._model,
            text="".join(self._text),
            tool_calls=calls,
            handoffs=handoffs_of(calls),
            error=self._error,
            complete=False,
            parse_error=problem,
        )


class ResponsesAdapter:
    provider = Provider.OPENAI
    api = Api.RESPONSES

    def parse_request(self, body: bytes, ctx: RequestContext) -> RequestInfo:
        read = read_conversation(body, ctx.history, str(self.api), "input", keep_input, read_input)
        if isinstance(read, str):
            return failed_request(self.api, read)
        data, talk = read
        instructions = data.get("instructions")
        if isinstance(instructions, str):
            talk.system(instructions, first=True)
        previous = data.get("previous_response_id")
        tool_names, agent_tools = _tools(data.get("tools"))
        info = talk.info(
            api=self.api,
            model=as_str(data.get("model")),
            stream=data.get("stream") is True,
            ctx=ctx,
            tool_names=tool_names,
            agent_tools=agent_tools,
            output_schema=_output_schema(data.get("text")),
            previous_response_id=previous if isinstance(previous, str) and previous else None,
            end_user=end_user_of(data),
        )
        if data.get("background") is True:
            info = dataclasses.replace(info, background=True)
        conversation = _conversation_id(data.get("conversation"))
        if conversation is None:
            return info
        # The server keeps the conversation: a step's input holds only its new items (tool outputs, no
        # user message), so the conversation, not its first message, is the root that groups the run.
        return dataclasses.replace(info, root_hash=digest("conversation\x00" + conversation))

    def parse_response(self, body: bytes) -> ResponseInfo:
        data, problem = load_object(body)
        if data is None:
            return ResponseInfo(parse_error=problem)
        return response_info(data)

    def stream_parser(self) -> ResponsesStreamParser:
        return ResponsesStreamParser()

    def error_response(self, notice: StopNotice, *, stream: bool, status: int = 429) -> Synthetic:
        return openai_replies.error_response(notice, status)

    def stop_response(self, notice: StopNotice, request: RequestInfo) -> Synthetic | None:
        text = stop_text(notice, request)
        if text is None:
            return None
        return openai_replies.responses_stop(notice, request.model, text, stream=request.stream)

    def stream_error_event(self, message: str, code: str) -> bytes:
        return openai_replies.responses_stream_error(message, code)
