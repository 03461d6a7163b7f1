"""Whether a tool call changes something: an edit, a write, a command that is not only reading.

An agent that runs the same command again after changing something is checking its change, even when
the command prints what it printed before (a build that says "done" whatever it built). Told apart by
what the call does: a shell command by its programs (`written.only_reads`), an editor by its action
(`str_replace`, `create`, `insert`, not `view`), any other tool by the words of its name (`Edit`,
`write_file`, `update_record`, `MultiEdit`).
"""

from __future__ import annotations

import re

from runguard.detectors.support.commands import command_of
from runguard.detectors.support.normalize import call_json
from runguard.detectors.support.written import only_reads
from runguard.proxy.core.events import ToolCall

CHANGING_WORDS = frozenset(
    {"edit", "write", "create", "update", "delete", "remove", "patch", "apply", "replace", "insert", "save", "rename"}
)
EDITOR_ACTIONS = frozenset({"str_replace", "create", "insert", "undo_edit", "write", "edit"})
_NAME_WORDS = re.compile(r"[a-z]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def changes(call: ToolCall) -> bool:
    """Whether `call` changes a file or other state (see the module docstring); reading and asking do not."""
    command = command_of(call)
    if command is not None:
        return not only_reads(command)
    value = call_json(call)
    if isinstance(value, dict) and isinstance(action := value.get("command"), str):
        return action in EDITOR_ACTIONS
    words = _NAME_WORDS.findall(_CAMEL.sub(" ", call.name).lower())
    return any(word in CHANGING_WORDS or word.startswith(("edit", "write")) for word in words)
