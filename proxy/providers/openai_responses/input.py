"""Reading a Responses request's input: the conversation (a string or a list of items), its tools and the
output schema its `text.format` demands.

Wire facts: wire-formats.md B. An assistant turn is a run of consecutive output items (messages, function
calls, reasoning). With `previous_response_id` the input holds only the new items: the guard fills
tool-result names from what it remembered about that response.
"""

from __future__ import annotations

from typing import Any

from runguard.proxy.core.events import OutputSchema
from runguard.proxy.providers.common import media
from runguard.proxy.providers.common.agent_tools import runs_an_agent
from runguard.proxy.providers.common.conversation import Conversation, last_index
from runguard.proxy.providers.common.jsonish import (
    as_dict,
    as_list,
    as_str,
    dumped_length,
    dumps_text,
    opt_str,
    text_of,
)
from runguard.proxy.providers.openai_responses.calls import (
    ASSISTANT_ITEMS,
    OUTPUT_ITEMS,
    call_of,
)


def _is_assistant(raw: Any) -> bool:
    if not isinstance(raw, dict):
        return False
    kind = raw.get("type", "message")
    if kind == "message":
        return bool(raw.get("role") == "assistant")
    return isinstance(kind, str) and kind in ASSISTANT_ITEMS


def read_input(talk: Conversation, items: Any) -> None:
    """Report the `input` items to `talk`, the items of finished turns first and fast.

    An agent loop resends its whole history with every request; only the last
    assistant turn needs `ToolCall`s, so the turns before it go through
    `_read_finished` (usual shapes counted in one pass, no `ToolCall` built).
    The result is that of reading every item with `_read_item`, which a property test holds
    (the oracle is in the tests: `tests/proxy/providers/common/forgiving.py`).
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
        if isinstance(kind, str) and kind in OUTPUT_ITEMS:
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
    elif kind in ASSISTANT_ITEMS:
        calls = [call_of(item, 0)] if kind != "reasoning" else []
        talk.assistant(len(dumps_text(item.get("summary", ""))) if not calls else 0, calls, continues=True)
    elif kind in OUTPUT_ITEMS:
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


def conversation_id(value: Any) -> str | None:
    """The server-side conversation a request continues: an id, or an object with one."""
    return opt_str(value) or opt_str(as_dict(value).get("id"))


def tools_of(tools: Any) -> tuple[tuple[str, ...], frozenset[str]]:
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


def output_schema_of(text: Any) -> OutputSchema | None:
    fmt = as_dict(as_dict(text).get("format"))
    if fmt.get("type") == "json_schema":
        return OutputSchema(as_dict(fmt.get("schema")), as_str(fmt.get("name")) or None)
    if fmt.get("type") == "json_object":
        return OutputSchema({}, None, "json_object")
    return None
