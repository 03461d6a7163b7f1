"""`stagnation`: the last actions (calls with their results) all identical."""

from __future__ import annotations

from runguard.detectors.stagnation import Stagnation
from tests.detectors.harness import (
    RunSimulator,
    Step,
    agent_loop,
    first_trip,
    request,
    response,
    review_transfers,
    shows,
)


def same_action(n: int, *, ids: bool = True) -> list[Step]:
    return agent_loop([[("click", {"selector": "#next"}, "page 3 of 3")] for _ in range(n)], ids=ids)


async def test_trips_when_four_actions_in_a_row_are_identical() -> None:
    results = await RunSimulator([Stagnation()]).run(same_action(5))
    # The 4th action's result comes back with request 5.
    assert first_trip(results) == 5
    finding = results[4].one("stagnation")
    assert len(shows(finding, "calls")["calls"]) >= 4
    assert finding.action == "block"
    assert "last 4 actions were identical" in finding.reason


async def test_gemini_without_call_ids_trips_the_same() -> None:
    assert first_trip(await RunSimulator([Stagnation()]).run(same_action(5, ids=False))) == 5


async def test_polling_whose_result_changes_is_progress() -> None:
    turns = [[("job_status", {"job_id": "j-1"}, f"{10 * i}% done")] for i in range(12)]
    assert first_trip(await RunSimulator([Stagnation()]).run(agent_loop(turns))) is None


async def test_a_long_plan_with_distinct_steps_passes() -> None:
    turns = [[("step", {"n": i}, f"done {i}")] for i in range(15)]
    assert first_trip(await RunSimulator([Stagnation()]).run(agent_loop(turns))) is None


async def test_a_parallel_batch_in_another_order_is_the_same_action() -> None:
    a, b = ("get", {"k": "a"}, "1"), ("get", {"k": "b"}, "2")
    turns = [[a, b], [b, a], [a, b], [b, a]]
    assert first_trip(await RunSimulator([Stagnation()]).run(agent_loop(turns))) == 5


async def test_a_client_retry_does_not_add_the_turn_twice() -> None:
    steps = same_action(4)
    script = [steps[0], steps[1], steps[2], steps[2], steps[3], steps[3], steps[4]]
    assert first_trip(await RunSimulator([Stagnation()]).run(script)) == 7


async def test_turns_without_tool_calls_are_skipped() -> None:
    steps = same_action(4)
    chat = Step(request(message_count=2), response(text="hello"))
    script = [steps[0], steps[1], chat, steps[2], steps[3], chat, steps[4]]
    assert first_trip(await RunSimulator([Stagnation()]).run(script)) == 7


async def test_the_same_transfer_again_and_again_is_left_to_handoff_cycle() -> None:
    turns = [review_transfers(1)[0]] * 6
    assert first_trip(await RunSimulator([Stagnation()]).run(agent_loop(turns, ids=False))) is None


RUNNING = "<status>running</status>\n\n<timestamp>2025-12-01T04:48:27.620Z</timestamp>"


async def test_a_job_checked_while_it_runs_is_left_to_non_progress() -> None:
    """The same check of a background job answered only "running": the answer cannot change before the job
    ends; how long and how fast the agent may check is `non_progress`'s (`poll_patience`)."""
    polls = agent_loop([[("BashOutput", {"bash_id": "79cab7"}, RUNNING)] for _ in range(8)])
    assert first_trip(await RunSimulator([Stagnation()]).run(polls)) is None
    # A check answered with the same failure each time is still the same action again.
    failing = agent_loop([[("BashOutput", {"bash_id": "79cab7"}, "Error: no shell 79cab7")] for _ in range(5)])
    assert first_trip(await RunSimulator([Stagnation()]).run(failing)) == 5
