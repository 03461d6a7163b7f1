"""`parallel_calls`: too many calls in one response, near-identical calls in one batch, a repeated batch."""

from __future__ import annotations

import dataclasses
from typing import Any

from runguard.detectors.parallel_calls import ParallelCalls
from runguard.proxy.core.events import Handoff, HandoffKind
from tests.detectors.harness import RunSimulator, Step, call, first_trip, request, response, shows


def batch(*calls: tuple[str, Any]) -> Step:
    return Step(request(), response(tool_calls=[call(name, args, f"c{i}", i) for i, (name, args) in enumerate(calls)]))


WEATHER = [("get_weather", {"city": city}) for city in ("Paris", "London", "Tokyo")]


async def test_a_wide_fan_out_passes_and_seventeen_calls_are_stopped_before_the_tools_run() -> None:
    """One response may fan out wide (sixteen lookups or sub-agents); seventeen is a spray."""
    results = await RunSimulator([ParallelCalls()]).run(
        [batch(*[("fetch", {"id": i}) for i in range(6)]), batch(*[("fetch", {"id": 10 + i}) for i in range(17)])]
    )
    assert first_trip(results) == 2
    finding = results[1].one("parallel_calls")
    shows(finding, "batch")
    assert results[1].inspect == [finding]  # decided on the response itself, before the client gets it
    assert finding.action == "block"
    assert "17 tool calls in one response, over the limit of 16" in finding.reason


async def test_a_parallel_batch_of_three_different_lookups_passes() -> None:
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*WEATHER)])) is None


async def test_the_same_lookup_sent_to_several_tools_at_once_trips() -> None:
    query = {"query": "ai agent cost control best practices 2026"}
    results = await RunSimulator([ParallelCalls()]).run([batch(("web_search", query), ("news_search", query))])
    finding = results[0].one("parallel_calls")
    assert "'web_search' and 'news_search' were called in one batch" in finding.reason


async def test_one_text_handed_to_several_agents_at_once_is_a_fan_out() -> None:
    """An orchestrator gives its translator agents (agent tools: delegations) the same sentence; the same
    text sent to two search tools still trips, and the delegations count towards the cap."""
    sentence = {"input": "Good morning, how are you doing today?"}
    agents = [f"translate_to_{language}" for language in ("spanish", "french", "italian")]
    calls = [call(name, sentence, f"c{i}", i) for i, name in enumerate(agents)]
    delegations = [Handoff(name, name, HandoffKind.DELEGATE, f"c{i}") for i, name in enumerate(agents)]
    fan_out = Step(request(), response(tool_calls=calls, handoffs=delegations))
    assert first_trip(await RunSimulator([ParallelCalls()]).run([fan_out])) is None
    searches = [call(name, sentence, f"s{i}", i + 3) for i, name in enumerate(("web_search", "news_search"))]
    mixed = Step(request(), response(tool_calls=[*calls, *searches], handoffs=delegations))
    results = await RunSimulator([ParallelCalls()]).run([mixed])
    assert "'web_search' and 'news_search' were called in one batch" in results[0].one("parallel_calls").reason

    def delegating(count: int) -> Step:
        many = [call(f"translate_to_{n}", sentence, f"c{n}", n) for n in range(count)]
        handed = [Handoff(c.name, c.name, HandoffKind.DELEGATE, c.call_id) for c in many]
        return Step(request(), response(tool_calls=many, handoffs=handed))

    assert first_trip(await RunSimulator([ParallelCalls()]).run([delegating(6)])) is None  # six agents at once
    results = await RunSimulator([ParallelCalls()]).run([delegating(17)])
    assert "17 tool calls in one response" in results[0].one("parallel_calls").reason


AGNO_TASK_TOOLS = ("create_task", "execute_task", "execute_tasks_parallel", "list_tasks", "mark_all_complete")


def planned(*calls: tuple[str, Any], tools: tuple[str, ...] = AGNO_TASK_TOOLS) -> Step:
    made = [call(name, args, f"c{i}", i) for i, (name, args) in enumerate(calls)]
    return Step(dataclasses.replace(request(), tool_names=tools), response(tool_calls=made))


async def test_an_agno_task_leader_writing_a_plan_of_seventeen_tasks_at_once_passes() -> None:
    """Agno's task mode: `create_task` writes the plan and runs nothing; its `execute_task` calls run the tasks."""
    regions = [f"region-{n}" for n in range(17)]
    tasks = [("create_task", {"title": f"{r.title()} sales", "assignee": f"{r}-analyst"}) for r in regions]
    assert first_trip(await RunSimulator([ParallelCalls()]).run([planned(*tasks)])) is None
    runs = [("execute_task", {"task_id": f"t{i}", "member_id": f"{r}-analyst"}) for i, r in enumerate(regions)]
    assert first_trip(await RunSimulator([ParallelCalls()]).run([planned(*runs)])) == 1
    # Without Agno's task tools declared, `create_task` is any tool: seventeen calls of it are over the cap.
    assert first_trip(await RunSimulator([ParallelCalls()]).run([planned(*tasks, tools=("create_task",))])) == 1


async def test_a_batch_repeating_the_previous_turns_batch_trips() -> None:
    results = await RunSimulator([ParallelCalls()]).run([batch(*WEATHER), batch(*WEATHER), batch(*WEATHER)])
    assert first_trip(results) == 2
    assert "repeats the previous turn's batch" in results[1].one("parallel_calls").reason


async def test_the_next_lookups_for_the_same_cities_with_another_tool_pass() -> None:
    forecast = [("get_forecast", args) for _, args in WEATHER]
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*WEATHER), batch(*forecast)])) is None


async def test_single_calls_are_never_compared_with_the_previous_turn() -> None:
    steps = [batch(("get_weather", {"city": "Paris"})) for _ in range(3)]
    assert first_trip(await RunSimulator([ParallelCalls()]).run(steps)) is None


async def test_a_turn_without_calls_ends_the_comparison() -> None:
    steps = [batch(*WEATHER), Step(request(), response(text="Here is the weather.")), batch(*WEATHER)]
    assert first_trip(await RunSimulator([ParallelCalls()]).run(steps)) is None


async def test_a_batch_of_lookups_with_the_same_options_passes() -> None:
    options = {"exchange": "NASDAQ", "currency": "USD", "fields": ["price", "volume", "market_cap"]}
    quotes = [("get_quote", {"symbol": symbol, **options}) for symbol in ("AAPL", "MSFT", "NVDA", "GOOGL", "AMZN")]
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*quotes)])) is None
    # The same five quotes asked again in the next turn are still a repeated batch.
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*quotes), batch(*quotes)])) == 2


async def test_calls_without_arguments_are_not_near_identical() -> None:
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(("get_time", {}), ("get_date", {}))])) is None


async def test_one_entity_looked_up_by_several_tools_at_once_passes() -> None:
    """A fan-out: one user's profile, orders and tickets; one city's weather, time and events."""
    user = [(tool, {"user_id": "u_42"}) for tool in ("get_user", "get_orders", "get_tickets")]
    city = [(tool, {"city": "Paris"}) for tool in ("get_weather", "get_local_time", "get_events")]
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*user), batch(*city)])) is None
    # The same id twice to one tool in one batch is still the same lookup twice.
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(user[0], user[0])])) == 1


def bash(command: str, description: str) -> tuple[str, dict[str, str]]:
    """A call of Claude Code's Bash tool: the command and a few words of what it is for."""
    return ("Bash", {"command": command, "description": description})


async def test_look_ups_that_differ_in_one_token_but_do_different_things_pass() -> None:
    """A coding-agent CLI's batches: pings to two hosts, two dig probes on two ports, six kills for six pids,
    one service's status on two hosts."""
    batches = [
        batch(*[bash(f"ping -c 1 {host}", "ping host") for host in ("web-1", "web-2")]),
        batch(*[bash(f"dig +short example.com @127.0.0.1 -p {port}", "probe resolver") for port in (53, 5353)]),
        batch(*[bash(f"kill {pid}", "stop stale server") for pid in range(4121, 4127)]),
        batch(*[("check_service", {"service": "ingest-worker", "host": h}) for h in ("db-1", "db-2")]),
    ]
    for step in batches:
        assert first_trip(await RunSimulator([ParallelCalls()]).run([step])) is None


async def test_the_same_command_or_question_sprayed_in_one_batch_still_trips() -> None:
    same = batch(*[bash("curl -s http://127.0.0.1:8080/health", "check health") for _ in range(2)])
    assert first_trip(await RunSimulator([ParallelCalls()]).run([same])) == 1
    asked = [("web_search", {"query": q}) for q in ("agent cost control 2026", "agent cost control 2026 guide")]
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*asked)])) == 1


def edit(old: str, new: str) -> tuple[str, dict[str, str]]:
    """A call of Claude Code's Edit tool on one file: the lines it replaces and their new text."""
    return ("Edit", {"file_path": "/repo/src/api/questions.py", "old_string": old, "new_string": new})


RENAMED = [
    edit(
        f"        templates = service.get_templates(\n            approach={arg},\n        )",
        f"        templates = service.get_templates_for_approach(\n            approach={arg},\n        )",
    )
    for arg in ("approach", "selection.selected_approach")
]


async def test_two_edits_of_one_file_at_two_places_pass() -> None:
    """A renamed method fixed at its two call sites in one answer: one path, two other old and new texts."""
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*RENAMED)])) is None
    # The next turn's edits of the same file, at other places, do not repeat the batch either.
    others = [edit(args["old_string"].replace("templates", "found"), args["new_string"]) for _, args in RENAMED]
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*RENAMED), batch(*others)])) is None


async def test_the_same_edit_twice_in_one_batch_or_again_next_turn_still_trips() -> None:
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(RENAMED[0], RENAMED[0])])) == 1
    assert first_trip(await RunSimulator([ParallelCalls()]).run([batch(*RENAMED), batch(*RENAMED)])) == 2
