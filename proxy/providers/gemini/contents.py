"""Reading a Gemini request's contents: its turns (`user` and `model`), their parts, its tools and the
output schema it demands.

Wire facts: wire-formats.md D and E.2. Requests may mix camelCase and snake_case keys (ADK does), so every
read accepts both. Tool results sit in a user turn as `functionResponse` parts, usually without ids (paired
by name and order).
"""

from __future__ import annotations

from typing import Any

from runguard.proxy.core.events import OutputSchema, ToolCall
from runguard.proxy.providers.common import media
from runguard.proxy.providers.common.agent_tools import runs_an_agent
from runguard.proxy.providers.common.conversation import Conversation, last_index
from runguard.proxy.providers.common.history import keep_turns
from runguard.proxy.providers.common.jsonish import as_dict, as_list, as_str, dumped_length, dumps_text, opt_str, pick

SET_MODEL_RESPONSE = "set_model_response"  # the tool ADK declares for an output schema next to other tools


def parts_of(content: Any) -> list[dict[str, Any]]:
    return [as_dict(part) for part in as_list(as_dict(content).get("parts"))]


def text_of_parts(parts: list[dict[str, Any]], *, thoughts: bool = False) -> str:
    return "".join(as_str(p.get("text")) for p in parts if thoughts or not p.get("thought"))


def calls_of(parts: list[dict[str, Any]], start: int = 0) -> list[ToolCall]:
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
    into `talk` but for user text. The result is that of reading every content
    with `_read_content`, which a property test holds (its oracle:
    `tests/proxy/providers/common/forgiving.py`).
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


def _read_content(talk: Conversation, raw: Any, *, earlier: bool) -> None:
    """Report one content, whatever its shape; `earlier`: before the last model turn."""
    content = as_dict(raw)
    parts = parts_of(content)
    if content.get("role") == "model":
        talk.assistant(len(text_of_parts(parts, thoughts=True)), calls_of(parts))
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
    text = text_of_parts(parts, thoughts=True)
    if text or not answered:
        media.user_said(talk, text, content.get("parts"))
    talk.weigh(media.inline_parts(parts) * media.MEDIA_CHARS)


def tools_of(tools: Any) -> tuple[tuple[str, ...], frozenset[str]]:
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


def output_schema_of(config: dict[str, Any], tools: Any) -> OutputSchema | None:
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
