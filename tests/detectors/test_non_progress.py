"""`non_progress`: the same tool returning the same (normalized) result N times in a row."""

from __future__ import annotations

from runguard.detectors.non_progress import NonProgress, NonProgressConfig
from runguard.detectors.support.turns import ACK_CHARS, acknowledges
from runguard.proxy.core.events import ToolResult
from tests.detectors.harness import RunSimulator, Step, agent_loop, first_trip, review_transfers, shows

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
