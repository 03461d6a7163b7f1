"""The call items of Responses: function, custom and built-in tool calls read as `ToolCall`s."""

from __future__ import annotations

from runguard.proxy.core.events import ToolCall
from runguard.proxy.providers.openai_responses.calls import (
    ASSISTANT_ITEMS,
    CALL_ITEMS,
    OUTPUT_ITEMS,
    arguments_of,
    call_of,
)


def test_a_function_call() -> None:
    item = {"type": "function_call", "call_id": "c1", "id": "fc_1", "name": "search", "arguments": '{"q":1}'}
    assert call_of(item, 2) == ToolCall("search", '{"q":1}', "c1", 2)


def test_a_custom_tool_s_input_and_an_id_when_no_call_id() -> None:
    item = {"type": "custom_tool_call", "id": "ct_1", "name": "patch", "input": "*** Begin Patch"}
    assert call_of(item, 0) == ToolCall("patch", "*** Begin Patch", "ct_1", 0)


def test_a_built_in_call_is_named_by_its_tool_and_its_arguments_are_its_action() -> None:
    item = {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}}
    assert arguments_of(item) == {"commands": ["ls"]}
    assert call_of(item, 0) == ToolCall("shell", '{"commands":["ls"]}', "s1", 0)
    patch = {"type": "apply_patch_call", "call_id": "p1", "operation": {"type": "create_file"}}
    assert call_of(patch, 1).name == "apply_patch"


def test_a_call_without_arguments_has_empty_ones() -> None:
    assert arguments_of({"type": "function_call"}) is None
    assert call_of({"type": "function_call", "name": "f"}, 0) == ToolCall("f", "", None, 0)


def test_item_kinds() -> None:
    assert {"function_call", "custom_tool_call", "shell_call", "local_shell_call", "apply_patch_call"} == CALL_ITEMS
    assert CALL_ITEMS | {"reasoning"} == ASSISTANT_ITEMS
    assert "function_call_output" in OUTPUT_ITEMS and "function_call" not in OUTPUT_ITEMS
