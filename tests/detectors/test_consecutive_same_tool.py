"""`consecutive_same_tool`: one tool, alone, in consecutive model turns (warns by default)."""

from __future__ import annotations

from runguard.detectors.consecutive_same_tool import ConsecutiveSameTool
from tests.detectors.harness import (
    RunSimulator,
    Step,
    agent_loop,
    call,
    first_trip,
    request,
    response,
    review_transfers,
)


async def test_the_third_consecutive_turn_is_flagged() -> None:
    turns = [[("list_files", {"page": i}, "r")] for i in range(4)]
    results = await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))
    assert first_trip(results) == 3
    finding = results[2].one("consecutive_same_tool")
    assert not finding.blocking
    assert "3 consecutive model turns" in finding.verdict.reason


async def test_a_parallel_batch_is_one_turn() -> None:
    turns = [[("lookup", {"id": j}, "r") for j in range(3)], [("lookup", {"id": 9}, "r")], [("lookup", {"id": 8}, "r")]]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))) == 3


async def test_another_tool_or_a_mixed_turn_breaks_the_streak() -> None:
    a, b = ("search", {"q": 1}, "r"), ("fetch", {"u": 1}, "r")
    turns = [[a], [a], [b], [a], [a], [a, b], [a], [a]]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))) is None


async def test_turns_without_tool_calls_are_not_turns_of_the_streak() -> None:
    def asking() -> Step:
        return Step(request(), response(tool_calls=[call("search", {"q": 1})]))

    steps = [asking(), Step(request(), response(text="thinking")), asking(), asking()]
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(steps)) == 4


async def test_agents_transferring_turn_after_turn_are_not_flagged() -> None:
    turns = review_transfers(3)
    assert first_trip(await RunSimulator([ConsecutiveSameTool()]).run(agent_loop(turns))) is None
