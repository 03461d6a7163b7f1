"""`consecutive_same_tool`: one tool, alone, in consecutive model turns (warns by default)."""

from __future__ import annotations

from runguard.detectors.consecutive_same_tool import ConsecutiveSameTool
from tests.detectors.harness import (
    RunSimulator,
    Step,
    agent_loop,
    call,
    declaring,
    delegations,
    first_trip,
    request,
    response,
    result,
    review_transfers,
    shows,
)


async def test_the_third_consecutive_turn_is_flagged() -> None:
    turns = [[("list_files", {"page": i}, "r")] for i in range(4)]
    results = await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))
    assert first_trip(results) == 3
    finding = results[2].one("consecutive_same_tool")
    shows(finding, "calls", "value", "limit")
    assert finding.action == "warn"
    assert "3 consecutive model turns" in finding.reason


async def test_a_parallel_batch_is_one_turn() -> None:
    turns = [[("lookup", {"id": j}, "r") for j in range(3)], [("lookup", {"id": 9}, "r")], [("lookup", {"id": 8}, "r")]]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))) == 3


async def test_another_tool_or_a_mixed_turn_breaks_the_streak() -> None:
    a, b = ("search", {"q": 1}, "r"), ("fetch", {"u": 1}, "r")
    turns = [[a], [a], [b], [a], [a], [a, b], [a], [a]]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))) is None


async def test_turns_without_tool_calls_are_not_turns_of_the_streak() -> None:
    def asking() -> Step:  # within one task: the request brings the last call's result
        searched = [result("search", {"hits": 0}, "c")]
        return Step(request(new_results=searched), response(tool_calls=[call("search", {"q": 1})]))

    thinking = Step(request(new_results=[result("search", {"hits": 0}, "c")]), response(text="thinking"))
    steps = [asking(), thinking, asking(), asking()]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(steps)) == 4


async def test_agents_transferring_turn_after_turn_are_not_flagged() -> None:
    turns = review_transfers(3)
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))) is None


async def test_a_leader_delegating_turn_after_turn_is_not_flagged() -> None:
    """Handing tasks to a member is the leader's work; `handoff_cycle` judges delegations."""
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(delegations(6))) is None
    searching = delegations(6, also=("search", {"q": "status"}, "r"))  # its own tool, alone but for them
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(searching)) == 3


async def test_a_new_question_from_the_user_starts_the_streak_again() -> None:
    """A session answering each question with one lookup: the user's turn sits between the calls."""

    def question(n: int) -> list[Step]:
        ask = Step(request(user_text=f"question {n}"), response(tool_calls=[call("search", {"q": n})]))
        answered = Step(
            request(new_results=[result("search", {"hits": n}, "c")], prior_calls=[call("search", {"q": n}, "c")]),
            response(text=f"answer {n}"),
        )
        return [ask, answered]

    steps = [step for n in range(5) for step in question(n)]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(steps)) is None


async def test_an_agent_whose_one_tool_is_bash_is_not_flagged_for_calling_it() -> None:
    commands = ["ls", "grep -rn 'retry' src/", "sed -n 1,40p src/http.py", "python -m pytest -q", "git diff"]
    turns = [[("bash", {"command": c}, f"out {i}")] for i, c in enumerate(commands)]
    steps = declaring(agent_loop(turns), "bash")
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(steps)) is None


async def test_a_shell_s_turns_break_another_tool_s_streak_and_make_none() -> None:
    tools = ("run_command", "list_files", "read_file")
    shell = [[("run_command", {"command": f"pytest -k case{i}"}, f"out {i}")] for i in range(4)]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(declaring(agent_loop(shell), *tools))) is None
    pages = [("list_files", {"page": 1}, "r"), ("list_files", {"page": 2}, "r")]
    mixed = [[pages[0]], [pages[1]], [("run_command", {"command": "ls"}, "a b")], [("list_files", {"page": 3}, "r")]]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(declaring(agent_loop(mixed), *tools))) is None
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(declaring(agent_loop(turns_of(pages)), *tools)))


def turns_of(pages: list[tuple[str, dict[str, int], str]]) -> list[list[tuple[str, dict[str, int], str]]]:
    return [[pages[0]], [pages[1]], [("list_files", {"page": 3}, "r")]]


async def test_a_long_streak_is_flagged_when_it_reaches_the_threshold_and_each_time_it_doubles() -> None:
    """Paging through 40 pages warns at turns 3, 6, 12 and 24, not on each of the 38 turns past the third."""
    turns = [[("list_files", {"page": i}, "r")] for i in range(40)]
    results = await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))
    flagged = [n + 1 for n, r in enumerate(results) if r.tripped("consecutive_same_tool")]
    assert flagged == [3, 6, 12, 24]
    assert "24 consecutive model turns" in results[23].one("consecutive_same_tool").reason
    again = [[("list_files", {"page": i}, "r")] for i in range(3)] + [[("search", {"q": 1}, "r")]] + turns[:3]
    assert [
        n + 1
        for n, r in enumerate(await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(again)))
        if r.tripped("consecutive_same_tool")
    ] == [3, 7]  # a new streak is flagged anew
