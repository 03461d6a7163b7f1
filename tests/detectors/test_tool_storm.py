"""`tool_storm`: one tool called very often in a run (warns by default)."""

from __future__ import annotations

from runguard.detectors.support.base import Action
from runguard.detectors.tool_storm import MAX_TOOLS, ToolStorm
from tests.detectors.harness import (
    RunSimulator,
    Turn,
    agent_loop,
    declaring,
    delegations,
    first_trip,
    review_transfers,
    shows,
)


async def test_the_eighth_call_of_one_tool_is_flagged_as_a_warning() -> None:
    turns = [[("web_search", {"query": f"q{i}"}, f"r{i}")] for i in range(9)]
    results = await RunSimulator([ToolStorm()]).run(agent_loop(turns))
    assert first_trip(results) == 8
    finding = results[7].one("tool_storm")
    assert shows(finding, "calls", "value", "limit")["value"] == 8
    assert finding.action == "warn"
    assert finding.reason == "tool 'web_search' was called 8 times in this run (limit 8)"
    assert ToolStorm.Config().action is Action.WARN


async def test_calls_in_one_parallel_batch_count_each() -> None:
    turns = [[("lookup", {"id": j}, "r") for j in range(4)], [("lookup", {"id": 10 + j}, "r") for j in range(4)]]
    assert first_trip(await RunSimulator([ToolStorm()]).run(agent_loop(turns))) == 2


async def test_seven_calls_each_of_several_tools_pass() -> None:
    turns = [[("search", {"q": i}, "r"), ("fetch", {"u": i}, "r"), ("note", {"n": i}, "r")] for i in range(7)]
    assert first_trip(await RunSimulator([ToolStorm()]).run(agent_loop(turns))) is None


async def test_counters_are_kept_for_a_bounded_number_of_tools() -> None:
    sim = RunSimulator([ToolStorm()])
    turns: list[Turn] = [[(f"tool_{i}", {}, "r")] for i in range(MAX_TOOLS + 10)]
    await sim.run(agent_loop(turns))
    fields = await sim.run_fields()
    assert sum(1 for name in fields if name.startswith("tool_storm.n.")) == MAX_TOOLS


async def test_handoffs_are_not_counted_as_tool_calls() -> None:
    turns = review_transfers(6)
    assert first_trip(await RunSimulator([ToolStorm()]).run(agent_loop(turns))) is None


async def test_a_leader_s_delegations_are_not_counted_but_its_own_tool_calls_are() -> None:
    """Handing tasks to a member is the leader's work; `handoff_cycle` judges delegations."""
    assert first_trip(await RunSimulator([ToolStorm()]).run(delegations(12))) is None
    searching = delegations(12, also=("search", {"q": "status"}, "r"))
    assert first_trip(await RunSimulator([ToolStorm()]).run(searching)) == 8


CODING_STEPS = [
    "grep -rn 'def load_config' src/",
    "sed -n 40,90p src/config.py",
    "python -m pytest tests/test_config.py -q",
    "cat > tests/test_env.py <<'EOF'\nimport os\nEOF",
    "python -m pytest tests/test_env.py -q",
    "git diff",
    "python -m pytest -q",
    "ls src/",
    "grep -n 'environ' src/config.py",
    "python -m pytest tests -q",
]


async def test_an_agent_whose_one_tool_is_bash_is_not_flagged_for_calling_it() -> None:
    """A coding agent whose one tool is `bash` calls it on every turn: that is how it works."""
    turns = [[("bash", {"command": c}, f"out {i}")] for i, c in enumerate(CODING_STEPS)]
    assert first_trip(await RunSimulator([ToolStorm()]).run(declaring(agent_loop(turns), "bash"))) is None


async def test_a_shell_among_other_tools_is_not_counted_but_the_others_are() -> None:
    shell = [[("execute_command", {"command": c}, f"out {i}")] for i, c in enumerate(CODING_STEPS)]
    searches = [[("web_search", {"query": f"q{i}"}, f"r{i}")] for i in range(8)]
    tools = ("execute_command", "web_search", "read_file")
    assert first_trip(await RunSimulator([ToolStorm()]).run(declaring(agent_loop(shell), *tools))) is None
    assert first_trip(await RunSimulator([ToolStorm()]).run(declaring(agent_loop(searches), *tools))) == 8


async def test_it_warns_again_only_when_the_count_doubles() -> None:
    """A long session reads files dozens of times: flagged at 8, 16 and 32 calls, not on every response after 8,
    and not on a response that does not call the tool."""
    turns: list[Turn] = []
    for i in range(40):
        turns.append([("read_file", {"path": f"f{i}.py"}, "text")])
        turns.append([("note", {"n": i}, "ok")])
    results = await RunSimulator([ToolStorm()]).run(agent_loop(turns))
    flagged = [(n + 1, r.one("tool_storm").reason) for n, r in enumerate(results) if r.tripped("tool_storm")]
    assert flagged == [
        (15, "tool 'read_file' was called 8 times in this run (limit 8)"),
        (16, "tool 'note' was called 8 times in this run (limit 8)"),
        (31, "tool 'read_file' was called 16 times in this run (limit 8)"),
        (32, "tool 'note' was called 16 times in this run (limit 8)"),
        (63, "tool 'read_file' was called 32 times in this run (limit 8)"),
        (64, "tool 'note' was called 32 times in this run (limit 8)"),
    ]
