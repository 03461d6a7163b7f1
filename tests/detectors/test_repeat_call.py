"""`repeat_call`: the same tool, arguments and result, again and again in a run."""

from __future__ import annotations

from runguard.detectors.repeat_call import RepeatCall
from tests.detectors.harness import RunSimulator, Step, Turn, agent_loop, first_trip, review_transfers, shows

FORBIDDEN = {"error": "403 Forbidden"}


def retries(n: int, *, ids: bool = True) -> list[Step]:
    return agent_loop([[("read_article", {"url": "https://example.com/a"}, FORBIDDEN)] for _ in range(n)], ids=ids)


async def test_trips_at_the_fourth_identical_call_and_result() -> None:
    results = await RunSimulator([RepeatCall()]).run(retries(5))
    # The 4th identical result comes back with request 5.
    assert first_trip(results) == 5
    finding = results[4].one("repeat_call")
    calls = shows(finding, "calls")["calls"]
    assert len(calls) == 4 and len({(c["args_digest"], c["result_digest"]) for c in calls}) == 1
    assert finding.evidence["repeats"] == 4
    assert "tool 'read_article' was called 4 times with identical arguments" in finding.reason


async def test_gemini_without_call_ids_trips_the_same() -> None:
    assert first_trip(await RunSimulator([RepeatCall()]).run(retries(5, ids=False))) == 5


async def test_repeats_count_across_the_run_not_only_in_a_row() -> None:
    turns: list[Turn] = []
    for i in range(4):
        turns.append([("read_article", {"url": "https://example.com/a"}, FORBIDDEN)])
        turns.append([("web_search", {"query": f"topic {i}"}, f"results {i}")])
    results = await RunSimulator([RepeatCall()]).run(agent_loop(turns))
    assert first_trip(results) == 8


async def test_polling_whose_result_changes_passes() -> None:
    turns = [[("job_status", {"job_id": "j-1"}, {"state": "running", "done": i})] for i in range(12)]
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(turns))) is None


async def test_a_fresh_request_id_in_the_result_does_not_hide_a_repeat() -> None:
    turns = [[("read_article", {"url": "u"}, {**FORBIDDEN, "request_id": f"r{i}"})] for i in range(4)]
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(turns))) == 5


async def test_a_client_retry_re_sending_the_same_body_does_not_count_twice() -> None:
    steps = retries(4)
    script = [steps[0], steps[1], steps[2], steps[2], steps[3], steps[3], steps[4]]
    assert first_trip(await RunSimulator([RepeatCall()]).run(script)) == 7


async def test_handing_over_to_the_same_agent_again_is_not_a_repeated_call() -> None:
    for adk in (True, False):
        turns = review_transfers(5, adk=adk)
        assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(turns))) is None


def polls(progress: list[int]) -> list[Turn]:
    """An agent waiting for a job: wait 10 s, then check it, round after round."""
    turns: list[Turn] = []
    for done in progress:
        turns.append([("wait", {"seconds": 10}, "Waited 10 seconds")])
        turns.append([("check_job", {"job_id": "j-42"}, {"status": "running", "progress": done})])
    return turns


async def test_the_wait_between_polls_is_not_a_repeat() -> None:
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(polls([0, 20, 40, 60, 80])))) is None
    # A poll finding the same thing every round still is one.
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(polls([20] * 5)))) == 9


async def test_a_job_still_running_checked_again_and_again_is_left_to_non_progress() -> None:
    """The same check of a background job, answered only that it is still running: the answer cannot change
    before the job ends; how long and how fast the agent may check is `non_progress`'s (`poll_patience`)."""
    running = "<status>running</status>\n\n<timestamp>2025-12-01T04:48:27.620Z</timestamp>"
    turns = [[("BashOutput", {"bash_id": "79cab7"}, running)] for _ in range(12)]
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(turns))) is None


async def test_rebuilding_after_each_new_edit_is_checking_the_edit_not_repeating() -> None:
    """A real Claude Code session rebuilt its plugin after each of a dozen new edits; the build printed the same
    lines every time. Each new edit starts the count again."""
    build = ("Bash", {"command": "npm run build && cp -r dist/* ../plugins/"}, "Done. Deployed")
    turns: list[Turn] = []
    for i in range(8):
        turns.append(
            [("Edit", {"file_path": "app.svelte", "old_string": f"v{i}", "new_string": f"v{i + 1}"}, f"ok {i}")]
        )
        turns.append([build])
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(turns))) is None


async def test_the_same_build_with_no_change_between_is_still_a_repeat() -> None:
    build = ("Bash", {"command": "npm run build"}, "error TS2304: Cannot find name 'x'")
    turns: list[Turn] = [[("Edit", {"file_path": "a.ts", "old_string": "y", "new_string": "x"}, "ok")]]
    turns += [[build], [("Read", {"file_path": "a.ts"}, "let x")]] * 4  # reading between the builds changes nothing
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(turns))) == 9
    flipping: list[Turn] = []
    for i in range(6):  # the same two edits back and forth: nothing new after the first two
        flipping.append([("Edit", {"file_path": "a.ts", "old_string": "ab"[i % 2], "new_string": "ba"[i % 2]}, "ok")])
        flipping.append([build])
    assert first_trip(await RunSimulator([RepeatCall()]).run(agent_loop(flipping))) == 11
