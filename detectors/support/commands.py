"""Command tools and what their results say, as the agent reads them.

A coding agent's main tool runs a shell command (`bash`, `shell`, `execute_command`, `run`, ...): its
argument's words are not its meaning (`grep -n "def a" f.py` and `grep -A20 "def b" f.py` share most of
their words and ask different questions), and what it returns is how the agent sees progress. Many of its
steps print nothing when they work (`cat > f <<EOF`, `cp`, `sed -i`, `git apply`, a `grep` that finds
nothing): an empty output says nothing about progress, it is no "same result again".

- `is_command_tool` / `command_of`: whether a call runs a shell command, and that command.
- `chosen_work`: a response's tool calls that say which tool the agent chose (no call of a shell, which runs
  every program): what `consecutive_same_tool` and `tool_storm` count.
- `trivial_output`: a result that only says a command ran (nothing printed, an exit code of 0 or 1).
"""

from __future__ import annotations

import re
from typing import Any

from runguard.detectors.support.normalize import NOT_JSON, call_json, result_json, strip_volatile
from runguard.detectors.support.turns import tool_work
from runguard.proxy.core.events import ResponseInfo, ToolCall, ToolResult, digest

# Tool names that run a shell command (lowercase); others count when their name says so and their
# arguments carry a `command` (`_COMMANDISH`).
COMMAND_TOOLS = frozenset(
    (
        "bash",
        "shell",
        "sh",
        "zsh",
        "terminal",
        "run",
        "exec",
        "execute",
        "execute_bash",
        "execute_command",
        "execute_shell",
        "exec_command",
        "run_command",
        "run_shell",
        "run_shell_command",
        "run_terminal_cmd",
        "run_in_terminal",
        "shell_command",
        "local_shell",
        "container.exec",
    )
)
COMMAND_KEYS = ("command", "cmd", "script")
_COMMANDISH = re.compile(r"bash|shell|terminal|command|exec|run")
_MEMO = "command"


def command_of(call: ToolCall) -> str | None:
    """The shell command the call runs, or None when its tool is no command tool.

    Read once per call: the string (or list of words, joined) under `command`, `cmd` or `script` of its
    arguments; for a tool named as a command tool, its arguments' text when they are no JSON object.
    """
    if _MEMO in call.derived:
        found: str | None = call.derived[_MEMO]
        return found
    call.derived[_MEMO] = found = _command(call)
    return found


def _command(call: ToolCall) -> str | None:
    name = call.name.lower()
    known = name in COMMAND_TOOLS
    if not known and _COMMANDISH.search(name) is None:
        return None
    value = call_json(call)
    if isinstance(value, dict):
        for key in COMMAND_KEYS:
            text = _words(value.get(key))
            if text is not None:
                return text
        return None
    if known:
        return call.arguments if value is NOT_JSON or isinstance(value, str) else None
    return None


def _words(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value and all(isinstance(word, str) for word in value):
        return " ".join(value)
    return None


def is_command_tool(call: ToolCall | None) -> bool:
    return call is not None and command_of(call) is not None


def chosen_work(response: ResponseInfo) -> list[ToolCall]:
    """The response's calls of a tool the agent chose (`turns.tool_work`'s, but no call of a command tool): a
    coding agent's shell runs every program, and the agent calls it turn after turn as its way of working (95%
    of a bash agent's responses were flagged); which command it runs, and what comes back, is the other
    detectors' to judge (`repeat_call`, `non_progress`, `spiral`)."""
    return [call for call in tool_work(response) if not is_command_tool(call)]


# An output that only says a command ran: nothing printed (once the client's wrapping is taken away).
_WRAPPING = re.compile(
    r"<(?:returncode|exit_code)>\s*[01]\s*</(?:returncode|exit_code)>"
    r"|</?[a-z][\w-]*>"  # the client's wrapping tags (<output>, <system>): what they hold is judged
    r"|\[?(?:command finished with )?exit code:?\s*[01]\]?"
    r"|\breturn ?code:?\s*[01]\b|\bexit status:?\s*[01]\b|\bexited with code [01]\b"
    r"|\b(?:output|stdout|stderr):"
    r"|your command ran successfully and did not produce any output\.?"
    r"|\(no (?:output|content)\)|\bno output\.?"
    r"|\bshell cwd was reset to [^\n]*"  # Claude Code moved the shell back to the project: a notice, no output
    r"|\btokens? (?:left|remaining)\b"  # a countdown the client appends (its number is volatile)
    r"|[\s#.:,\[\]()\"'{}]+",
    re.IGNORECASE,
)
TRIVIAL_CHARS = 300  # a longer output says something
_QUIET_KEYS = ("output", "stdout", "stderr", "result", "content", "text")
_CODE_KEYS = ("exit_code", "exitcode", "returncode", "return_code", "code", "status")


def trivial_output(result: ToolResult) -> bool:
    """Whether a command's result only says it ran: it printed nothing, and its exit code (if it says one) is 0
    or 1 (`grep` that matched nothing). Such a result breaks no streak and makes none."""
    content = result.content
    if len(content) > TRIVIAL_CHARS:
        return False
    value = result.value if result.value is not None else result_json(result)
    if isinstance(value, dict):
        return _quiet_value(value)
    return _WRAPPING.sub("", strip_volatile(content)) == ""


def _quiet_value(value: dict[str, Any], depth: int = 0) -> bool:
    """Whether a JSON result (`{"output": "", "metadata": {"exit_code": 0}}`) prints nothing: it names an
    output or an exit code, its outputs are empty, its exit code is 0 or 1, and nothing else says more."""
    named = False
    for key, item in value.items():
        lowered = key.lower()
        if lowered in _QUIET_KEYS:
            named = True
            if item and not (isinstance(item, str) and not _WRAPPING.sub("", strip_volatile(item))):
                return False
        elif lowered in _CODE_KEYS:
            named = True
            if item not in (0, 1, "0", "1", "success", "ok", None):
                return False
        elif isinstance(item, dict) and depth < 2:
            if not _quiet_value(item, depth + 1):
                return False
            named = True
        elif isinstance(item, str | list) and item:
            return False
    return named or depth > 0


def empty_answer(result: ToolResult) -> bool:
    """Whether a result found nothing: empty text, `[]`, `{}`, `null`, or an object of empty lists and objects
    (`{"results": []}`)."""
    if len(result.content) > TRIVIAL_CHARS:
        return False
    value = result.value if result.value is not None else result_json(result)
    if value is NOT_JSON:
        return not result.content.strip()
    return _empty(value)


def _empty(value: Any) -> bool:
    if value is None or value in ("", [], {}):
        return True
    return isinstance(value, dict) and all(item in ([], {}, None) for item in value.values())


def asked_values(call: ToolCall) -> str:
    """A digest of the one-word values of a call's JSON arguments (codes, ids, dates, numbers: `JFK`, `1042`),
    not its free text: two searches for other routes or other orders ask other questions, while a query
    reworded asks the same. "-" when there are none."""
    found: str | None = call.derived.get("asked")
    if found is not None:
        return found
    words: list[str] = []
    _words_of(call_json(call), words, 0)
    call.derived["asked"] = found = digest("\x00".join(words), 4) if words else "-"
    return found


def _words_of(value: Any, out: list[str], depth: int) -> None:
    if depth > 8:
        return
    if isinstance(value, dict):
        for key in sorted(value):
            _words_of(value[key], out, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _words_of(item, out, depth + 1)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float) or (isinstance(value, str) and value and " " not in value.strip()):
        out.append(str(value))
