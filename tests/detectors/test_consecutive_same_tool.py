"""`consecutive_same_tool`: one tool, alone, in consecutive model turns (warns by default)."""

from __future__ import annotations

from runguard.detectors.consecutive_same_tool import ConsecutiveSameTool
from tests.detectors.harness import (
    RunSimulator,
    Step,
    agent_loop,
    call,
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
