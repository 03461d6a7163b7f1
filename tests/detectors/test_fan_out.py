"""`fan_out`: the same parallel batch sent again, reworded, turn after turn."""

from __future__ import annotations

from typing import Any

from runguard.detectors.fan_out import FanOut, FanOutConfig
from runguard.proxy.core.ops import Put, Scope
from tests.detectors.harness import RunSimulator, Step, Turn, agent_loop, first_trip, shows

AGENTS = ["flights_agent", "hotels_agent", "trains_agent", "visa_agent", "weather_agent"]
TASKS = [
    "find the cheapest options from Lisbon to Berlin in May and report prices",
    "search again for the cheapest Lisbon to Berlin options in May and list prices",
    "look once more for the cheapest May options Lisbon to Berlin and report the prices",
    "try again: cheapest Lisbon to Berlin options in May, report prices",
    "one more time find the cheapest options Lisbon Berlin May with prices",
]


def fan_out(task: str, agents: list[str] = AGENTS) -> list[tuple[str, Any, Any]]:
    return [(agent, {"input": f"{agent.split('_')[0]}: {task}"}, f"{agent} answer") for agent in agents]


async def test_a_five_wide_fan_out_repeated_reworded_is_stopped_at_the_third_round() -> None:
    results = await RunSimulator([FanOut()]).run(agent_loop([fan_out(task) for task in TASKS]))
    assert first_trip(results) == 3
    finding = results[2].one("fan_out")
    assert results[2].inspect == [finding]  # on the response, before its tools run
    assert finding.action == "block"
    assert finding.evidence["tools"] == sorted(AGENTS)
    assert finding.evidence["turns"] == 3 and shows(finding, "batch")["width"] == 5
    assert finding.evidence["similarity"] >= 0.5


async def test_one_wide_fan_out_then_a_summary_passes() -> None:
    wide = [(f"analyst_{i}", {"input": f"analyse region {i} sales"}, "ok") for i in range(12)]
    assert first_trip(await RunSimulator([FanOut()]).run(agent_loop([wide]))) is None


async def test_rounds_with_new_tasks_for_the_same_agents_pass() -> None:
    rounds = [
        "draft the outline of the travel guide chapter on Berlin",
        "review the Lisbon chapter for factual errors about opening hours",
        "collect visitor numbers for the museums named in chapter three",
        "write captions for the twelve photos of the Alfama district",
        "check every price quoted in the guide against the 2026 tariffs",
    ]
    assert first_trip(await RunSimulator([FanOut()]).run(agent_loop([fan_out(task) for task in rounds]))) is None


async def test_a_map_over_chunks_in_rounds_passes() -> None:
    turns: list[Turn] = [
        [("summarize_chunk", {"chunk_id": f"doc-{r}-{i}"}, "summary") for i in range(5)] for r in range(6)
    ]
    assert first_trip(await RunSimulator([FanOut()]).run(agent_loop(turns))) is None


async def test_another_set_of_agents_restarts_the_count() -> None:
    turns = [fan_out(TASKS[0]), fan_out(TASKS[1]), fan_out(TASKS[2], AGENTS[:4]), fan_out(TASKS[3], AGENTS[:4])]
    assert first_trip(await RunSimulator([FanOut()]).run(agent_loop(turns))) is None


async def test_a_turn_without_a_fan_out_restarts_the_count() -> None:
    single = [("flights_agent", {"input": "summarise what you found"}, "summary")]
    turns = [fan_out(TASKS[0]), fan_out(TASKS[1]), single, fan_out(TASKS[2]), fan_out(TASKS[3])]
    assert first_trip(await RunSimulator([FanOut()]).run(agent_loop(turns))) is None


async def test_turns_is_tightenable() -> None:
    steps = agent_loop([fan_out(task) for task in TASKS])
    assert first_trip(await RunSimulator([(FanOut(), FanOutConfig(turns=2))]).run(steps)) == 2


async def test_an_unreadable_stored_batch_reads_as_none() -> None:
    for stored in ("x#y#z", "2#no-batch", "garbage"):
        sim = RunSimulator([FanOut()])
        await sim.state.execute(sim.ids(), [Put(Scope.RUN, "fan_out.prev", stored)])
        steps: list[Step] = agent_loop([fan_out(task) for task in TASKS[:2]])
        assert first_trip(await sim.run(steps)) is None  # and no detector fault (the harness checks every step)


def todo_beside(edit: int, functions: list[str]) -> list[tuple[str, Any, Any]]:
    """A coding-agent CLI's turn: its to-do list (one more item done) beside an edit of the next function."""
    todos = [
        {"content": f"Fix {name}", "status": "completed" if i < edit else "pending"} for i, name in enumerate(functions)
    ]
    name = functions[edit]
    change = {"file_path": "/app/queue.py", "old_string": f"def {name}(job):\n    # BUG: never done\n    pass"}
    change["new_string"] = f"def {name}(job):\n    job.status = '{name}'\n    return job"
    return [("TodoWrite", {"todos": todos}, "Todos updated"), ("Edit", change, "The file was updated")]


async def test_editing_one_function_after_another_with_the_to_do_list_beside_passes() -> None:
    """Each edit's code has no words (texts of three lines), so every edit of the one file looks like the last;
    the to-do list names other items done: the batch does other work each turn, not the same fan-out."""
    functions = ["submit_job", "worker", "start_workers", "get_status", "cancel_job"]
    turns = [todo_beside(i, functions) for i in range(len(functions))]
    assert first_trip(await RunSimulator([FanOut()]).run(agent_loop(turns))) is None
