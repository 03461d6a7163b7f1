"""The call items of a Responses conversation or output: function, custom and built-in tool calls.

Both the input (the calls of earlier assistant turns) and the output (the calls the model makes) hold them,
in the same shapes; `call_of` reads one as a `ToolCall`.
"""

from __future__ import annotations

from typing import Any

from runguard.proxy.core.events import ToolCall
from runguard.proxy.providers.common.jsonish import as_str, dumps_text, opt_str

# Built-in tools the agent runs itself, as it runs function tools (openai-agents' ShellTool,
# LocalShellTool, ApplyPatchTool): the call names no tool (its tool is named by its type, as in
# `tools`), and its arguments are an object under another key.
BUILTIN_CALLS = {
    "shell_call": ("shell", "action"),
    "local_shell_call": ("local_shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
}
CALL_ITEMS = frozenset({"function_call", "custom_tool_call", *BUILTIN_CALLS})
ASSISTANT_ITEMS = CALL_ITEMS | {"reasoning"}
OUTPUT_ITEMS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "shell_call_output",
        "local_shell_call_output",
        "apply_patch_call_output",
    }
)


def arguments_of(item: dict[str, Any]) -> Any:
    """A call item's arguments as the wire has them (None when absent): a JSON string, a custom
    tool's raw input, or a built-in tool's action object."""
    builtin = BUILTIN_CALLS.get(as_str(item.get("type")))
    if builtin is not None:
        return item.get(builtin[1])
    return item.get("arguments", item.get("input"))


def call_of(item: dict[str, Any], index: int) -> ToolCall:
    arguments = arguments_of(item)
    call_id = opt_str(item.get("call_id")) or opt_str(item.get("id"))
    builtin = BUILTIN_CALLS.get(as_str(item.get("type")))
    name = builtin[0] if builtin is not None else as_str(item.get("name"))
    return ToolCall(name, dumps_text("" if arguments is None else arguments), call_id, index)
