"""A call changes something when it edits, writes or runs a command that does more than read."""

from __future__ import annotations

import orjson

from runguard.detectors.support.changes import changes
from runguard.proxy.core.events import ToolCall


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(name=name, arguments=orjson.dumps(arguments).decode(), call_id="c")


def test_edits_writes_and_commands_that_write_change_something() -> None:
    assert changes(_call("Edit", file_path="a.py", old_string="x", new_string="y"))
    assert changes(_call("MultiEdit", file_path="a.py"))
    assert changes(_call("write_file", path="a.py", content=""))
    assert changes(_call("str_replace_editor", command="str_replace", path="a.py"))
    assert changes(_call("bash", command="npm run build && cp -r dist/* out/"))
    assert changes(_call("bash", command="sed -i 's/a/b/' f.py"))


def test_reading_searching_and_viewing_change_nothing() -> None:
    assert not changes(_call("Read", file_path="a.py"))
    assert not changes(_call("web_search", query="editor settings"))
    assert not changes(_call("str_replace_editor", command="view", path="a.py"))
    assert not changes(_call("bash", command="grep -n 'def load' a.py | head"))
    assert not changes(_call("getCredits", user="u1"))
