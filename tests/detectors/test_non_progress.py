"""`non_progress`: the same tool returning the same (normalized) result N times in a row."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from runguard.detectors.non_progress import NonProgress, NonProgressConfig
from runguard.detectors.support.turns import ACK_CHARS, acknowledges
from runguard.proxy.core.events import ToolResult
from tests.detectors.harness import RunSimulator, Step, Turn, agent_loop, first_trip, review_transfers, shows

STUCK = {"status": "partial_parse_error", "data": None}


def stuck_loop(n: int, *, ids: bool = True) -> list[Step]:
    """The model rephrases its hint every time; the parser answers the same soft error."""
    return agent_loop([[("parse_document", {"hint": f"try {i}"}, STUCK)] for i in range(n)], ids=ids)


async def test_trips_on_the_third_identical_result_not_the_second() -> None:
    results = await RunSimulator([NonProgress()]).run(stuck_loop(5))
    # Response i asks for call i; request i+1 brings its result: the 3rd result arrives with request 4.
    assert first_trip(results) == 4
    finding = results[3].one("non_progress")
    calls = shows(finding, "calls")["calls"]
    assert len(calls) == 3 and len({c["result_digest"] for c in calls}) == 1 and calls[-1]["request_seq"] == 4
    assert finding.action == "block"
    assert finding.reason == "tool 'parse_document' returned the same result 3 times in a row"
    assert finding.evidence["repeats"] == 3


async def test_gemini_without_call_ids_trips_the_same() -> None:
    results = await RunSimulator([NonProgress()]).run(stuck_loop(5, ids=False))
    assert first_trip(results) == 4


async def test_volatile_keys_are_ignored() -> None:
    turns = [
        [("parse_document", {"hint": i}, {**STUCK, "request_id": f"r{i}", "meta": {"timestamp": 1000 + i}})]
        for i in range(4)
    ]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) == 4


async def test_per_tool_volatile_keys_apply_to_that_tool_only() -> None:
    def turns(tool: str) -> list[list[tuple[str, object, object]]]:
        return [[(tool, {"hint": i}, {**STUCK, "attempt": i})] for i in range(4)]

    config = NonProgressConfig(volatile_keys_by_tool={"parse_document": ["attempt"]})
    assert first_trip(await RunSimulator([(NonProgress(), config)]).run(agent_loop(turns("parse_document")))) == 4
    assert first_trip(await RunSimulator([(NonProgress(), config)]).run(agent_loop(turns("other_tool")))) is None


async def test_a_tool_whose_result_changes_every_iteration_passes() -> None:
    turns = [[("check_job", {"job": "j1"}, {"status": "running", "progress": 8 * i})] for i in range(12)]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) is None


async def test_a_parallel_batch_of_identical_results_counts_once() -> None:
    batch = [[("parse_document", {"part": j, "try": i}, STUCK) for j in range(3)] for i in range(4)]
    results = await RunSimulator([NonProgress()]).run(agent_loop(batch))
    assert first_trip(results) == 4


async def test_a_client_retry_re_sending_the_same_body_does_not_count_twice() -> None:
    for ids in (True, False):
        steps = stuck_loop(4, ids=ids)
        # Requests 2 and 3 are each sent twice (an SDK retry after a timeout).
        script = [steps[0], steps[1], steps[1], steps[2], steps[2], steps[3]]
        results = await RunSimulator([NonProgress()]).run(script)
        assert first_trip(results) == 6


async def test_another_result_in_between_breaks_the_streak() -> None:
    turns = [[("parse_document", {"hint": i}, STUCK)] if i % 2 == 0 else [("log", {"i": i}, "ok")] for i in range(8)]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) is None


async def test_threshold_is_configurable() -> None:
    results = await RunSimulator([(NonProgress(), NonProgressConfig(threshold=5))]).run(stuck_loop(6))
    assert first_trip(results) == 6


async def test_handoff_acknowledgements_are_not_tool_results() -> None:
    """ADK answers every `transfer_to_agent` with `{"result": null}`: a review loop is `handoff_cycle`'s to judge."""
    turns = review_transfers(4)
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns, ids=False))) is None


def writes(result: object, n: int = 5) -> list[Step]:
    """A coding agent writing `n` files one after the other; the tool answers `result` every time."""
    return agent_loop([[("write_file", {"path": f"src/m{i}.py", "content": f"x = {i}"}, result)] for i in range(n)])


async def test_a_tool_acknowledging_each_call_the_same_way_is_making_progress() -> None:
    for done in ("File written successfully.", {"status": "sent"}, {"ok": True}, "Done", "Edited src/app.py"):
        assert first_trip(await RunSimulator([NonProgress()]).run(writes(done))) is None, done


async def test_acknowledgements_count_when_configured_to() -> None:
    config = NonProgressConfig(acknowledgements_progress=False)
    results = await RunSimulator([(NonProgress(), config)]).run(writes("ok"))
    assert first_trip(results) == 4


async def test_an_acknowledgement_breaks_a_streak_and_soft_errors_still_trip() -> None:
    turns = [[("parse_document", {"hint": f"try {i}"}, STUCK)] for i in range(2)]
    turns.append([("parse_document", {"hint": "try 2"}, "Parsed successfully")])
    turns += [[("parse_document", {"hint": f"try {i}"}, STUCK)] for i in range(3, 6)]
    results = await RunSimulator([NonProgress()]).run(agent_loop(turns))
    assert first_trip(results) == 7  # the streak starts again after the success: results 4, 5 and 6


def test_what_reads_as_an_acknowledgement() -> None:
    def acked(content: str) -> bool:
        return acknowledges(ToolResult("tool", "c1", content))

    assert all(map(acked, ["ok", "File written successfully.", '{"status": "sent"}', '{"success": true}']))
    assert not any(
        map(
            acked,
            [
                '{"status": "partial_parse_error", "data": null}',
                "Error: file not found",
                '{"success": false}',
                "Job queued, try again later",
                "No results found",
                "[]",
                "Saved. " + "x" * ACK_CHARS,
                "Value not set",
                "Nothing changed",
                "File already exists",
            ],
        )
    )


def bash(command: str, output: object) -> tuple[str, object, object]:
    return ("bash", {"command": command}, output)


# A coding agent's steps that print nothing when they work, and how five clients show an empty output.
QUIET_COMMANDS = [
    "cat > fix_parser.py <<'EOF'\nimport re\nEOF",
    "cp settings.py settings.py.orig",
    "sed -i 's/timeout=5/timeout=30/' client/session.py",
    "git apply /tmp/retry.patch",
    "grep -rn 'legacy_mode' src/",
    "touch docs/CHANGES.rst",
]
EMPTY_OUTPUTS = [
    "",
    "<returncode>0</returncode>\n<output>\n</output>",
    "Your command ran successfully and did not produce any output.",
    '{"output": "", "metadata": {"exit_code": 0, "duration_seconds": 0.2}}',
    "[Command finished with exit code 0]",
    "(no output)",
    "Shell cwd was reset to /home/dev/project",  # Claude Code's notice after a command that moved the shell
]


@pytest.mark.parametrize("empty", EMPTY_OUTPUTS)
async def test_commands_that_print_nothing_are_steps_done_not_the_same_result(empty: str) -> None:
    turns = [[bash(command, empty)] for command in QUIET_COMMANDS]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) is None


async def test_greps_that_find_nothing_are_questions_answered() -> None:
    greps = ["grep -rn 'legacy_mode' src/", "grep -rn 'LEGACY' config/", "grep -n 'def legacy' src/app.py"]
    turns = [[bash(g, "[Command finished with exit code 1]")] for g in greps]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) is None


async def test_a_command_failing_the_same_way_still_trips_between_quiet_steps() -> None:
    failing = bash("python -m pytest tests/test_session.py -x -q", "E   AssertionError: timeout is 5\n1 failed")
    turns = [[failing], [failing], [failing]]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) == 4


async def test_an_empty_answer_of_a_tool_that_runs_no_command_still_counts() -> None:
    turns = [[("search_orders", {"query": q}, "")] for q in ("late parcel", "parcel delayed", "where is my order")]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) == 4


async def test_the_same_output_with_a_countdown_appended_is_the_same_result() -> None:
    def turn(left: int) -> list[tuple[str, object, object]]:
        reminder = f"\n\n<system>{left:,} tokens left. Chunk id: {left * 7919:x}q{left}</system>"
        return [bash("python repro.py", "Traceback (most recent call last):\nKeyError: 'user'" + reminder)]

    turns = [turn(left) for left in (81234, 74410, 66020)]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) == 4


async def test_nothing_found_for_other_routes_is_a_new_answer_each_time() -> None:
    """A travel agent searching flights on one route after another: some have none (`[]`), each a new fact."""
    routes = [("JFK", "SEA"), ("JFK", "LAX"), ("EWR", "SEA"), ("LGA", "SFO")]
    turns = [[("search_direct_flight", {"origin": a, "destination": b, "date": "2024-05-20"}, "[]")] for a, b in routes]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) is None


async def test_nothing_found_for_a_query_reworded_or_asked_again_still_trips() -> None:
    reworded = [
        [("search_orders", {"query": q, "limit": 5}, '{"results": []}')] for q in ("late parcel", "parcel late")
    ]
    again = [[("search_direct_flight", {"origin": "JFK", "destination": "SEA"}, "[]")] for _ in range(3)]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop([*reworded, reworded[0]]))) == 4
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(again))) == 4


def reminder(left: int) -> str:
    """What a coding-agent CLI appends to every tool result: a countdown and a random chunk id."""
    return f"\n<system>{left:,} tokens left. Chunk id: {left * 2654435761 % 2**40:x}</system>"


def fix_test_turns(outputs: list[str]) -> list[list[tuple[str, object, object]]]:
    """Run the test, flip one line, run it again: `outputs` are the test's outputs, in turn."""
    turns: list[list[tuple[str, object, object]]] = []
    for i, out in enumerate(outputs):
        left = 150_000 - 9_137 * i
        turns.append([bash("python -m pytest tests/test_version.py -x -q", out + reminder(left))])
        old, new = ("<", "<=") if i % 2 == 0 else ("<=", "<")
        turns.append([bash(f"sed -i 's/if major {old} 1:/if major {new} 1:/' src/version.py", reminder(left - 4_000))])
    return turns


FAILING = "F\nE   assert parse('1.0') == Version(1, 0)\n1 failed in {}s"


async def test_a_fix_test_loop_is_stopped_at_its_6th_request() -> None:
    """The same failure three times, a line flipped between (its edits print nothing), every result carrying
    the client's volatile countdown: the 6th request brings the third failure back."""
    outputs = [FAILING.format(t) for t in ("0.31", "0.29", "0.33", "0.30", "0.32")]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(fix_test_turns(outputs)))) == 6


async def test_a_fix_test_loop_whose_failures_change_is_work() -> None:
    outputs = [
        FAILING.format("0.31"),
        "F\nE   assert parse('1.0') == Version(1, 0, 0)\n1 failed in 0.30s",
        "F\nE   TypeError: Version() takes 2 arguments\n1 failed in 0.28s",
        "1 passed in 0.27s",
    ]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(fix_test_turns(outputs)))) is None


DESKS = ("ask_flights", "ask_hotels", "ask_trains", "ask_visas", "ask_weather")
REWORDED = [
    "find the cheapest options from Lisbon to Berlin in May and report prices",
    "search again for the cheapest Lisbon to Berlin options in May and list prices",
    "look once more for the cheapest May options Lisbon to Berlin and report the prices",
    "try again: cheapest Lisbon to Berlin options in May, report prices",
]
NEW_TASKS = [
    "list the options from Lisbon to Berlin in May",
    "book the option the traveller picked: reference TP552",
    "send the confirmation to the traveller's calendar and email",
    "check for changes to the booking a week before departure",
]


def coordinator(answer: Callable[[str, int], str], tasks: list[str] = REWORDED, agent_tools: bool = True) -> list[Step]:
    """A coordinator asking its five desks (agent tools, or plain tools) in turn, `tasks[r]` in round r."""
    turns = [[(desk, {"input": task}, answer(desk, r))] for r, task in enumerate(tasks) for desk in DESKS]
    steps = agent_loop(turns, agent_name="coordinator")
    if not agent_tools:
        return steps
    return [dataclasses.replace(s, request=dataclasses.replace(s.request, agent_tools=frozenset(DESKS))) for s in steps]


async def test_an_agent_tool_answering_the_same_among_the_others_trips_at_its_third_answer() -> None:
    results = await RunSimulator([NonProgress()]).run(coordinator(lambda desk, r: f"{desk}: 41 to 132 EUR"))
    # The flights desk answers with requests 2, 7 and 12.
    assert first_trip(results) == 12
    finding = results[11].one("non_progress")
    assert finding.evidence["tool"] == "ask_flights" and finding.evidence["repeats"] == 3
    assert "among its own answers" in finding.reason


async def test_agent_tools_giving_new_answers_pass() -> None:
    results = await RunSimulator([NonProgress()]).run(coordinator(lambda desk, r: f"{desk}: option {r}"))
    assert first_trip(results) is None


async def test_agent_tools_handed_new_tasks_answering_the_same_pass() -> None:
    """Each task asks something new: the same answer to it is not the same question answered again."""
    same = await RunSimulator([NonProgress()]).run(
        coordinator(lambda desk, r: f"{desk}: three options found, 41 to 132 EUR", NEW_TASKS)
    )
    assert first_trip(same) is None


async def test_plain_tools_answering_the_same_between_others_do_not_count_together() -> None:
    """A test run failing the same way between edits that answer differently is judged in a row, as ever."""
    results = await RunSimulator([NonProgress()]).run(coordinator(lambda d, r: f"{d}: 41 EUR", agent_tools=False))
    assert first_trip(results) is None


def agno_leader(answer: Callable[[str, int], str], tasks: list[str] = REWORDED) -> list[Step]:
    """An Agno leader delegating to its five desk members in turn through its one tool, `tasks[r]` in round r."""
    turns = [
        [("delegate_task_to_member", {"member_id": f"{desk}-desk", "task": task}, answer(desk, r))]
        for r, task in enumerate(tasks)
        for desk in DESKS
    ]
    return agent_loop(turns, agent_name="leader")


async def test_an_agno_member_answering_the_same_among_the_others_trips_at_its_third_answer() -> None:
    """One tool for all members: each member's answers are counted among its own, not pooled."""
    results = await RunSimulator([NonProgress()]).run(agno_leader(lambda desk, r: f"{desk}: 41 to 132 EUR"))
    assert first_trip(results) == 12
    finding = results[11].one("non_progress")
    assert finding.evidence["tool"] == "delegate_task_to_member" and finding.evidence["member"] == "ask_flights-desk"
    assert finding.evidence["repeats"] == 3 and "member 'ask_flights-desk'" in finding.reason


async def test_agno_members_handed_new_tasks_or_giving_new_answers_pass() -> None:
    same = await RunSimulator([NonProgress()]).run(agno_leader(lambda desk, r: f"{desk}: 41 to 132 EUR", NEW_TASKS))
    assert first_trip(same) is None
    new = await RunSimulator([NonProgress()]).run(agno_leader(lambda desk, r: f"{desk}: option {r}"))
    assert first_trip(new) is None


def running(second: int) -> str:
    """Claude Code's `BashOutput` on a background job that has not finished: its status and a timestamp."""
    return f"<status>running</status>\n\n<timestamp>2025-12-01T04:{second // 60:02d}:{second % 60:02d}.000Z</timestamp>"


def polls(count: int, every: float, then: Turn | None = None) -> list[Step]:
    """An agent checking its background job `count` times, `every` seconds apart (then doing `then`)."""
    turns: list[Turn] = [[("BashOutput", {"bash_id": "5d8215"}, running(int(i * every)))] for i in range(count)]
    if then is not None:
        turns.append(then)
    return [dataclasses.replace(step, advance=every) for step in agent_loop(turns)]


async def test_a_job_still_running_checked_a_few_times_is_the_agent_waiting() -> None:
    """A slow search checked five times in 12 s, then killed for a narrower one: no repeated failure."""
    kill: Turn = [("KillShell", {"shell_id": "5d8215"}, '{"message": "Successfully killed shell: 5d8215"}')]
    assert first_trip(await RunSimulator([NonProgress()]).run(polls(5, 3.0, kill))) is None


async def test_checks_with_waits_between_them_wait_as_long_as_the_job_runs() -> None:
    """A long extraction checked every 40 s (a `sleep 30` and the check): thirty checks, twenty minutes."""
    assert first_trip(await RunSimulator([NonProgress()]).run(polls(30, 40.0))) is None


async def test_a_busy_loop_of_checks_is_stopped_at_its_poll_patience() -> None:
    """The same job checked every 3 s, hundreds of times: stopped at the 10th check (the request that brings
    it is the 11th), not at `threshold`'s 3rd."""
    results = await RunSimulator([NonProgress()]).run(polls(40, 3.0))
    assert first_trip(results) == 11
    finding = results[10].one("non_progress")
    assert finding.reason == (
        "tool 'BashOutput' answered that its job is still running 10 times in a row, checked again within seconds"
    )
    assert finding.evidence["repeats"] == 10 and finding.evidence["poll_seconds"] == 27.0
    patient = NonProgressConfig(poll_patience=20, poll_seconds=30)
    assert first_trip(await RunSimulator([(NonProgress(), patient)]).run(polls(40, 3.0))) is None
    assert first_trip(await RunSimulator([(NonProgress(), patient)]).run(polls(40, 1.0))) == 21


async def test_a_busy_loop_after_patient_checks_is_still_stopped() -> None:
    """Checks a minute apart, then every 2 s: stopped once its last ten checks came within 120 s (the 12th
    check), not judged by the first ten (192 s)."""
    script = agent_loop([[("BashOutput", {"bash_id": "5d8215"}, running(i))] for i in range(35)])
    timed = [dataclasses.replace(step, advance=60.0 if i < 5 else 2.0) for i, step in enumerate(script)]
    assert first_trip(await RunSimulator([NonProgress()]).run(timed)) == 13


async def test_a_re_sent_check_does_not_count_twice() -> None:
    steps = polls(12, 3.0)
    script = [*steps[:4], dataclasses.replace(steps[3], advance=1.0), *steps[4:]]
    assert first_trip(await RunSimulator([NonProgress()]).run(script)) == 12


async def test_a_status_with_a_progress_figure_that_stays_put_is_judged_as_any_result() -> None:
    """The job says how far it got: the same figure three times is the same answer three times."""
    turns: list[Turn] = [[("check_job", {"job": "j1"}, {"status": "running", "progress": 20})] for _ in range(4)]
    assert first_trip(await RunSimulator([NonProgress()]).run(agent_loop(turns))) == 4


def printed(books: int) -> str:
    """`BashOutput` on a background ingestion that prints a line per book: still running, `books` done."""
    lines = "".join(f"Processing: book {i}\n  Stored: 710 vectors\n" for i in range(books))
    return (
        f"<status>running</status>\n\n<stdout>\nFound 51 files to process\n{lines}</stdout>\n\n<timestamp>#</timestamp>"
    )


async def test_a_job_s_log_silent_for_a_few_checks_during_a_long_step_is_waiting() -> None:
    """Checked every 4 s, a book done every few checks: three checks found the same output while one large book
    was embedded, then the next line came. A log that stays the same ten checks in 40 s is a busy loop."""
    done = [1, 2, 2, 3, 3, 3, 4, 5, 5, 6]
    turns: list[Turn] = [[("BashOutput", {"bash_id": "ad2a83"}, printed(n))] for n in done]
    steps = [dataclasses.replace(step, advance=4.0) for step in agent_loop(turns)]
    assert first_trip(await RunSimulator([NonProgress()]).run(steps)) is None
    silent: list[Turn] = [[("BashOutput", {"bash_id": "ad2a83"}, printed(3))] for _ in range(12)]
    steps = [dataclasses.replace(step, advance=4.0) for step in agent_loop(silent)]
    assert first_trip(await RunSimulator([NonProgress()]).run(steps)) == 11
