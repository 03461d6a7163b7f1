"""`commands`: which calls run a shell command, and which of their outputs only say that it ran."""

from __future__ import annotations

import pytest

from runguard.detectors.support.commands import asked_values, command_of, empty_answer, is_command_tool, trivial_output
from runguard.proxy.core.events import ToolCall, ToolResult


@pytest.mark.parametrize(
    ("name", "arguments", "command"),
    [
        ("bash", '{"command": "ls -la"}', "ls -la"),
        ("execute_command", '{"command": "npm test", "requires_approval": false}', "npm test"),
        ("shell", '{"command": ["bash", "-lc", "pytest -q"]}', "bash -lc pytest -q"),
        ("run", "python repro.py", "python repro.py"),
        ("run_shell_command", '{"cmd": "make"}', "make"),
        ("get_weather", '{"command": "forecast"}', None),  # a command key, but no command tool
        ("bash", '{"path": "a.py"}', None),
    ],
)
def test_command_of_reads_the_command_a_call_runs(name: str, arguments: str, command: str | None) -> None:
    call = ToolCall(name, arguments)
    assert command_of(call) == command
    assert is_command_tool(call) is (command is not None)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "  \n",
        "<returncode>0</returncode>\n<output>\n</output>",
        "Your command ran successfully and did not produce any output.",
        '{"output": "", "metadata": {"exit_code": 0, "duration_seconds": 1.4}}',
        "[Command finished with exit code 1]",
        "Exit code: 0\nOutput:\n",
        "(no output)\n\n12,400 tokens left",
        "Shell cwd was reset to /home/dev/project",
    ],
)
def test_an_output_that_only_says_the_command_ran_is_trivial(content: str) -> None:
    assert trivial_output(ToolResult("bash", "c1", content))


@pytest.mark.parametrize(
    "content",
    [
        "1 failed, 3 passed in 0.4s",
        "src/app.py:12: def load(path):",
        "<returncode>2</returncode>\n<output>\n</output>",
        '{"output": "", "metadata": {"exit_code": 127}}',
        '{"output": "bash: pytest: command not found", "metadata": {"exit_code": 127}}',
        '{"results": []}',
        "[Command finished with exit code 137]",
        "x" * 400,
        "2 passed\nShell cwd was reset to /home/dev/project",
    ],
)
def test_an_output_that_says_something_is_not(content: str) -> None:
    assert not trivial_output(ToolResult("bash", "c1", content))


def test_an_empty_answer_and_what_a_call_asked() -> None:
    assert all(empty_answer(ToolResult("t", None, text)) for text in ("", "[]", "{}", "null", '{"results": []}'))
    assert not any(empty_answer(ToolResult("t", None, text)) for text in ("0", '[{"id": 1}]', "none found", '{"n": 0}'))
    route = ToolCall("search", '{"origin": "JFK", "destination": "SEA", "note": "cheapest first"}')
    other = ToolCall("search", '{"origin": "JFK", "destination": "LAX", "note": "cheapest first"}')
    reworded = ToolCall("search", '{"origin": "JFK", "destination": "SEA", "note": "lowest fare first"}')
    assert asked_values(route) != asked_values(other)
    assert asked_values(route) == asked_values(reworded)
