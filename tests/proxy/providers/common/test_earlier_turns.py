"""The fast read of earlier turns (Chat `messages`, Responses `input`, Gemini `contents`) agrees with the forgiving one.

Both adapters read the turns before the last assistant turn without building
`ToolCall`s, and the shapes SDKs send with plain dict operations; the
forgiving readers stay as the reference. Generated conversations mix the
usual shapes with odd ones (missing ids, non-string arguments, extra keys,
wrong types, empty parts, snake_case keys), and a realistic conversation gets
one wrong value anywhere; the `RequestInfo` must come out equal either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from runguard.proxy.core.events import Api, RequestInfo
from runguard.proxy.providers.common.conversation import Conversation
from runguard.proxy.providers.gemini.contents import read_contents
from runguard.proxy.providers.openai_chat.adapter import read_messages
from runguard.proxy.providers.openai_responses.input import read_input
from tests.proxy.providers.common.forgiving import (
    read_contents_forgiving,
    read_input_forgiving,
    read_messages_forgiving,
)
from tests.proxy.providers.test_fuzz import WRONG, paths_of, replaced

Reader = Callable[[Conversation, Any], None]
EXAMPLES = settings(max_examples=600, deadline=None)


def info_of(read: Reader, items: Any, instructions: str | None) -> RequestInfo:
    talk = Conversation()
    if instructions is not None:
        talk.system(instructions)
    read(talk, items)
    return talk.info(api=Api.RESPONSES, model="m", stream=False, agent_header=None, tool_names=("t",))


def assert_same(fast: Reader, forgiving: Reader, items: Any, instructions: str | None = None) -> None:
    assert info_of(fast, items, instructions) == info_of(forgiving, items, instructions)


# Mostly strings (empty ones too), as SDKs send, then the wrong types a broken client might.
_ODD: st.SearchStrategy[Any] = st.one_of(
    st.just(""), st.none(), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2), st.just({}), st.just([])
)
_TEXT = st.text(max_size=6)  # non-ASCII too
_STR: st.SearchStrategy[Any] = st.one_of(_TEXT, _TEXT, _TEXT, _ODD)
_IDS: st.SearchStrategy[Any] = st.one_of(st.sampled_from(["c1", "c2", ""]), _ODD)  # few, so results find calls
_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
_EXTRA = st.dictionaries(st.sampled_from(["status", "id", "x"]), _JSON, max_size=2)


def _item(required: dict[str, Any], optional: dict[str, Any] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with `required` keys, any of `optional`, and maybe some keys nobody reads."""
    return st.builds(lambda a, b: {**b, **a}, st.fixed_dictionaries(required, optional=optional or {}), _EXTRA)


# --- OpenAI Responses `input` items

_PARTS = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("output_text"), "text": _STR}),
        st.fixed_dictionaries({"type": st.just("refusal"), "refusal": _STR}),
        _TEXT,
        _ODD,
    ),
    max_size=3,
)
_CONTENT = st.one_of(_TEXT, _PARTS, _ODD)
_ROLES = st.one_of(st.sampled_from(["user", "assistant", "system", "developer", "tool"]), _ODD)
_MESSAGE = _item({"role": _ROLES, "content": _CONTENT}, {"type": st.just("message")})
_ASSISTANT_MESSAGE = _item({"type": st.just("message"), "role": st.just("assistant"), "content": _CONTENT})
_USUAL_CALL = _item(
    {
        "type": st.just("function_call"),
        "call_id": st.sampled_from(["c1", "c2", "c3"]),
        "name": _TEXT,
        "arguments": _TEXT,
    }
)
_ODD_CALL = _item(
    {"type": st.sampled_from(["function_call", "custom_tool_call"])},
    {"call_id": _IDS, "id": _IDS, "name": _STR, "arguments": st.one_of(_STR, _JSON), "input": _STR},
)
_NEAR_USUAL_CALL = _item(  # the usual keys with odd values, and `id` (read when `call_id` is no non-empty string)
    {"type": st.just("function_call"), "call_id": st.one_of(st.just(""), _IDS), "name": _STR, "arguments": _STR},
    {"id": _IDS},
)
_USUAL_OUTPUT = _item({"type": st.just("function_call_output"), "call_id": _IDS, "output": _TEXT})
_ODD_OUTPUT = _item(
    {"type": st.sampled_from(["function_call_output", "custom_tool_call_output"])},
    {"call_id": _IDS, "output": st.one_of(_CONTENT, _JSON)},
)
_REASONING = _item({"type": st.just("reasoning")}, {"summary": st.one_of(_JSON, st.just([]))})
_OTHER_ITEM = st.one_of(
    _item({"type": st.sampled_from(["item_reference", "web_search_call", "image_generation_call"])}),
    _item({"type": _ODD}, {"role": _ROLES, "content": _CONTENT}),
    _ODD,
    _TEXT,
)
_INPUT_ITEM = st.one_of(
    _USUAL_CALL,
    _NEAR_USUAL_CALL,
    _USUAL_OUTPUT,
    _USUAL_OUTPUT,
    _MESSAGE,
    _ASSISTANT_MESSAGE,
    _REASONING,
    _ODD_CALL,
    _ODD_OUTPUT,
    _OTHER_ITEM,
)


# A turn: assistant items, maybe with system messages and unmodelled items among them (they do not end
# a turn), then what ends it: tool results, a user message, or a value read as an empty user message.
_IN_TURN = st.one_of(
    _USUAL_CALL,
    _NEAR_USUAL_CALL,
    _ODD_CALL,
    _ASSISTANT_MESSAGE,
    _REASONING,
    _item({"role": st.sampled_from(["system", "developer"]), "content": _CONTENT}),
    _OTHER_ITEM,
)
_TURN_END = st.one_of(_USUAL_OUTPUT, _ODD_OUTPUT, _item({"role": _ROLES, "content": _CONTENT}), _ODD)
_TURNS = st.lists(
    st.tuples(st.lists(_IN_TURN, min_size=1, max_size=4), st.lists(_TURN_END, max_size=2)), max_size=5
).map(lambda turns: [item for calls, ends in turns for item in (*calls, *ends)])


@given(items=st.one_of(st.lists(_INPUT_ITEM, max_size=14), _TURNS), instructions=st.one_of(st.none(), _TEXT))
@example(  # an earlier call with an empty `call_id` is known by its `id`
    items=[
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "", "id": "c1", "name": "a", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c9", "output": "r"},
        {"type": "function_call", "call_id": "c2", "name": "b", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "r"},
    ],
    instructions=None,
)
@example(  # a system message or an item reference inside a turn does not end it: the tail turn has both calls
    items=[
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
        {"role": "system", "content": "be brief"},
        {"type": "item_reference", "id": "msg_1"},
        {"type": "function_call", "call_id": "c2", "name": "b", "arguments": "{}"},
    ],
    instructions=None,
)
@EXAMPLES
def test_responses_fast_read_of_earlier_items_agrees_with_the_forgiving_one(
    items: list[Any], instructions: str | None
) -> None:
    assert_same(read_input, read_input_forgiving, items, instructions)


@given(items=st.one_of(_TEXT, _ODD, _JSON))
@EXAMPLES
def test_responses_input_that_is_no_list_reads_the_same(items: Any) -> None:
    assert_same(read_input, read_input_forgiving, items)


def responses_loop(steps: int) -> list[Any]:
    """An openai-agents style loop: task, then per step reasoning, a message and a call, then its output."""
    items: list[Any] = [{"role": "user", "content": "the task"}]
    for step in range(steps):
        call_id = f"call_{step}"
        items += [
            {"type": "reasoning", "id": f"rs_{step}", "summary": [{"type": "summary_text", "text": "hm"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"step {step}"}]},
            {"type": "function_call", "call_id": call_id, "name": "search", "arguments": f'{{"q": "{step}é"}}'},
            {"type": "function_call_output", "call_id": call_id, "output": f"found {step}"},
        ]
    return items


def test_responses_long_loop_reads_the_same() -> None:
    items = responses_loop(40)
    assert_same(read_input, read_input_forgiving, items)
    assert_same(read_input, read_input_forgiving, items[:-1])  # the last turn's call, no output yet
    assert_same(read_input, read_input_forgiving, [*items, {"role": "user", "content": "and now?"}])
    info = info_of(read_input, items, None)
    assert [c.call_id for c in info.prior_calls] == ["call_39"] and info.assistant_turns == 40
    assert [r.name for r in info.new_results] == ["search"]


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_responses_one_wrong_value_anywhere_in_a_long_loop_reads_the_same(data: st.DataObject) -> None:
    items = responses_loop(4)
    path = data.draw(st.sampled_from(paths_of(items)), label="path")
    assert_same(read_input, read_input_forgiving, replaced(items, path, data.draw(st.sampled_from(WRONG))))


# --- Gemini `contents`

_ARGS = st.one_of(st.dictionaries(st.text(max_size=3), _JSON, max_size=3), _JSON)
_USUAL_FUNCTION_CALL = st.fixed_dictionaries({"name": _TEXT, "args": st.dictionaries(st.text(max_size=3), _JSON)})
_ODD_FUNCTION_CALL = st.one_of(
    st.fixed_dictionaries({}, optional={"name": _STR, "args": _ARGS, "id": _IDS}),
    _ODD,
)
_FUNCTION_RESPONSE = st.one_of(
    st.fixed_dictionaries({"name": _TEXT, "response": st.dictionaries(st.text(max_size=3), _JSON)}),
    st.fixed_dictionaries({}, optional={"name": _STR, "response": _JSON, "id": _IDS}),
    _ODD,
)


def _part(key: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return _item({key: value}, {"text": _STR, "thought": st.booleans(), "thoughtSignature": _TEXT})


_PART = st.one_of(
    _part("functionCall", _USUAL_FUNCTION_CALL),
    _part("functionCall", _ODD_FUNCTION_CALL),
    _part("function_call", st.one_of(_USUAL_FUNCTION_CALL, _ODD_FUNCTION_CALL)),
    _item({"functionCall": st.none(), "function_call": _USUAL_FUNCTION_CALL}),  # `pick` falls back on None only
    _part("functionResponse", _FUNCTION_RESPONSE),
    _part("function_response", _FUNCTION_RESPONSE),
    _item({"functionResponse": _FUNCTION_RESPONSE, "function_response": _FUNCTION_RESPONSE}),
    _item({"text": _STR}, {"thought": st.booleans()}),
    st.just({}),
    _ODD,
    _TEXT,
)
_CONTENT_ROLE = st.one_of(st.sampled_from(["user", "model", "model"]), _ODD)
_GEMINI_CONTENT = st.one_of(
    st.fixed_dictionaries({"role": _CONTENT_ROLE, "parts": st.lists(_PART, max_size=3)}),
    st.fixed_dictionaries({}, optional={"role": _CONTENT_ROLE, "parts": st.one_of(st.lists(_PART, max_size=3), _ODD)}),
    _ODD,
)


# Turns as agents send them: the model's parts (none in some), then the user's, now and then an odd content.
_GEMINI_TURNS = st.lists(
    st.tuples(
        st.lists(st.fixed_dictionaries({"role": st.just("model"), "parts": st.lists(_PART, max_size=3)}), max_size=1),
        st.fixed_dictionaries({"role": st.just("user"), "parts": st.lists(_PART, max_size=3)}),
        st.lists(_GEMINI_CONTENT, max_size=1),
    ),
    max_size=5,
).map(lambda turns: [content for model, user, odd in turns for content in (*model, user, *odd)])


@given(
    contents=st.one_of(st.lists(_GEMINI_CONTENT, max_size=12), _GEMINI_TURNS),
    instructions=st.one_of(st.none(), _TEXT),
)
@EXAMPLES
def test_gemini_fast_read_of_earlier_contents_agrees_with_the_forgiving_one(
    contents: list[Any], instructions: str | None
) -> None:
    assert_same(read_contents, read_contents_forgiving, contents, instructions)


@given(contents=st.one_of(_TEXT, _ODD, _JSON))
@EXAMPLES
def test_gemini_contents_that_are_no_list_read_the_same(contents: Any) -> None:
    assert_same(read_contents, read_contents_forgiving, contents)


def gemini_loop(steps: int) -> list[Any]:
    """An ADK style loop: task, then per step a model call (with a thought) and the user's functionResponse."""
    contents: list[Any] = [{"role": "user", "parts": [{"text": "the task"}]}]
    for step in range(steps):
        call = {"id": f"adk-{step}", "name": "search", "args": {"q": f"{step}é", "n": step}}
        contents += [
            {"role": "model", "parts": [{"text": "thinking", "thought": True}, {"functionCall": call}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "search", "response": {"result": [step]}}}]},
        ]
    return contents


def test_gemini_long_loop_reads_the_same() -> None:
    contents = gemini_loop(40)
    assert_same(read_contents, read_contents_forgiving, contents)
    assert_same(read_contents, read_contents_forgiving, contents[:-1])
    assert_same(read_contents, read_contents_forgiving, [*contents, {"role": "user", "parts": [{"text": "more"}]}])
    info = info_of(read_contents, contents, None)
    assert [c.call_id for c in info.prior_calls] == ["adk-39"] and info.assistant_turns == 40
    assert [r.name for r in info.new_results] == ["search"]


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_gemini_one_wrong_value_anywhere_in_a_long_loop_reads_the_same(data: st.DataObject) -> None:
    contents = gemini_loop(4)
    path = data.draw(st.sampled_from(paths_of(contents)), label="path")
    assert_same(read_contents, read_contents_forgiving, replaced(contents, path, data.draw(st.sampled_from(WRONG))))


# --- OpenAI Chat `messages`

_USUAL_TOOL_CALL = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["c1", "c2", "c3"]),
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": _TEXT, "arguments": _TEXT}),
    }
)
_ODD_TOOL_CALL = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"id": _IDS, "function": st.one_of(_ODD, _item({}, {"name": _STR, "arguments": _ARGS}))}
    ),
    _item({"type": st.just("custom"), "custom": _item({}, {"name": _STR, "input": _STR})}, {"id": _IDS}),
    _ODD,
)
_TOOL_CALLS = st.one_of(st.lists(st.one_of(_USUAL_TOOL_CALL, _ODD_TOOL_CALL), max_size=3), _ODD)
_CHAT_ASSISTANT = _item({"role": st.just("assistant"), "content": _CONTENT}, {"tool_calls": _TOOL_CALLS})
_CHAT_TOOL = _item(
    {"role": st.sampled_from(["tool", "function"]), "content": _CONTENT}, {"tool_call_id": _IDS, "name": _STR}
)
_CHAT_MESSAGE = st.one_of(
    _CHAT_ASSISTANT,
    _CHAT_TOOL,
    _item({"role": _ROLES, "content": _CONTENT}, {"tool_calls": _TOOL_CALLS, "tool_call_id": _IDS}),
    _ODD,
    _TEXT,
)
# Turns as agents send them: an assistant message (with calls, mostly), then results or a user message.
_CHAT_TURNS = st.lists(
    st.tuples(_CHAT_ASSISTANT, st.lists(st.one_of(_CHAT_TOOL, _CHAT_MESSAGE), max_size=3)), max_size=5
).map(lambda turns: [message for assistant, after in turns for message in (assistant, *after)])


@given(
    messages=st.one_of(st.lists(_CHAT_MESSAGE, max_size=12), _CHAT_TURNS),
    instructions=st.one_of(st.none(), _TEXT),
)
@example(  # a result for a call made two turns ago still finds its tool's name
    messages=[
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "a", "arguments": "{}"}}]},
        {"role": "assistant", "tool_calls": [{"id": "c2", "function": {"name": "b", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "late"},
    ],
    instructions=None,
)
@EXAMPLES
def test_chat_fast_read_of_earlier_messages_agrees_with_the_forgiving_one(
    messages: list[Any], instructions: str | None
) -> None:
    assert_same(read_messages, read_messages_forgiving, messages, instructions)


@given(messages=st.one_of(_TEXT, _ODD, _JSON))
@EXAMPLES
def test_chat_messages_that_are_no_list_read_the_same(messages: Any) -> None:
    assert_same(read_messages, read_messages_forgiving, messages)


def chat_loop(steps: int) -> list[Any]:
    """An openai-python style loop: system, task, then per step an assistant call and its tool message."""
    messages: list[Any] = [{"role": "system", "content": "be useful"}, {"role": "user", "content": "the task"}]
    for step in range(steps):
        call = {
            "id": f"call_{step}",
            "type": "function",
            "function": {"name": "search", "arguments": f'{{"q": {step}}}'},
        }
        messages += [
            {"role": "assistant", "content": None if step % 2 else f"step {step}é", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{step}", "content": f"found {step}"},
        ]
    return messages


def test_chat_long_loop_reads_the_same() -> None:
    messages = chat_loop(40)
    assert_same(read_messages, read_messages_forgiving, messages)
    assert_same(read_messages, read_messages_forgiving, messages[:-1])
    assert_same(read_messages, read_messages_forgiving, [*messages, {"role": "user", "content": "and now?"}])
    info = info_of(read_messages, messages, None)
    assert [c.call_id for c in info.prior_calls] == ["call_39"] and info.assistant_turns == 40
    assert [r.name for r in info.new_results] == ["search"] and info.message_count == 82


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_chat_one_wrong_value_anywhere_in_a_long_loop_reads_the_same(data: st.DataObject) -> None:
    messages = chat_loop(4)
    path = data.draw(st.sampled_from(paths_of(messages)), label="path")
    assert_same(read_messages, read_messages_forgiving, replaced(messages, path, data.draw(st.sampled_from(WRONG))))
