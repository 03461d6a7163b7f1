"""`oscillation`: the last six actions hold two distinct ones or fewer."""

from __future__ import annotations

from runguard.detectors.oscillation import Oscillation
from tests.detectors.harness import RunSimulator, agent_loop, first_trip, review_transfers, shows

A = ("open_tab", {"tab": "settings"}, "settings page")
B = ("open_tab", {"tab": "billing"}, "billing page")
C = ("open_tab", {"tab": "usage"}, "usage page")


async def test_trips_once_six_actions_alternate_between_two() -> None:
    turns = [[A], [B], [A], [B], [A], [B], [A]]
    results = await RunSimulator([Oscillation()]).run(agent_loop(turns))
    # The 6th action's result comes back with request 7.
    assert first_trip(results) == 7
    finding = results[6].one("oscillation")
    shows(finding, "calls")
    assert finding.action == "block"
    assert "only 2 distinct" in finding.reason


async def test_three_distinct_actions_in_rotation_pass() -> None:
    turns = [[A], [B], [C]] * 4
    assert first_trip(await RunSimulator([Oscillation()]).run(agent_loop(turns))) is None


async def test_alternating_polls_whose_results_change_pass() -> None:
    turns = [[("status", {"job": i % 2}, f"{i}0%")] for i in range(12)]
    assert first_trip(await RunSimulator([Oscillation()]).run(agent_loop(turns))) is None


async def test_a_long_plan_with_distinct_steps_passes() -> None:
    turns = [[("step", {"n": i}, f"done {i}")] for i in range(15)]
    assert first_trip(await RunSimulator([Oscillation()]).run(agent_loop(turns))) is None


async def test_agents_handing_work_back_and_forth_are_left_to_handoff_cycle() -> None:
    for adk in (True, False):
        turns = review_transfers(5, adk=adk)
        assert first_trip(await RunSimulator([Oscillation()]).run(agent_loop(turns))) is None


async def test_a_tool_toggled_alongside_handoffs_still_trips() -> None:
    handing = ("transfer_to_agent", {"agent_name": "editor"}, {"result": None})
    turns = [[A, handing], [B], [A, handing], [B], [A, handing], [B], [A]]
    assert first_trip(await RunSimulator([Oscillation()]).run(agent_loop(turns, ids=False))) == 7


async def test_waiting_on_a_running_job_between_checks_passes() -> None:
    """`sleep 30`, then a check answered only "running", round after round: waiting (`non_progress`'s)."""
    running = "<status>running</status>\n\n<timestamp>2025-12-01T04:52:14.910Z</timestamp>"
    wait = ("Bash", {"command": "sleep 30", "description": "Wait for extraction"}, "")
    check = ("BashOutput", {"bash_id": "5d8215"}, running)
    turns = [[wait], [check]] * 5
    assert first_trip(await RunSimulator([Oscillation()]).run(agent_loop(turns))) is None
    # Going back and forth between two tabs is still oscillating.
    assert first_trip(await RunSimulator([Oscillation()]).run(agent_loop([[A], [B]] * 4))) == 7
