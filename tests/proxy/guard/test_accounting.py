"""The guard's own counters, run on the in-memory state as a request's batches run them: what each request
learns of its run, and what a response, a warning and a nudge leave for the next."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from runguard.proxy.core.events import Usage
from runguard.proxy.core.ops import Op, OpResult, Put, Scope
from runguard.proxy.guard import accounting, breaker
from runguard.proxy.guard.ticket import scope_ids
from runguard.proxy.state.memory import MemoryState

NOW = 1_000_000.0
IDS = scope_ids("k_a/run-1", "k_a", "gpt-4o-mini", NOW)


@pytest.fixture
def state() -> MemoryState:
    return MemoryState()


async def run(state: MemoryState, ops: Sequence[Op]) -> list[OpResult]:
    return await state.execute(IDS, ops)


async def admit(state: MemoryState, now: float = NOW, body: str = "b1") -> list[OpResult]:
    return await run(state, [*accounting.request_ops(now, body), accounting.seen_op(now)])


async def test_each_request_counts_itself_in_its_run_and_in_flight(state: MemoryState) -> None:
    facts, breakers = accounting.facts_from(await admit(state))
    assert (facts.request_index, facts.started_at, facts.in_flight, facts.usd) == (1, NOW, 1, 0.0)
    assert breakers == accounting.Breakers(None, None, None)
    facts, _ = accounting.facts_from(await admit(state, NOW + 5, "b2"))
    assert (facts.request_index, facts.started_at, facts.in_flight) == (2, NOW, 2)  # began at the first


async def test_a_response_releases_its_slot_and_adds_its_usage_to_the_run_and_the_key_s_day(
    state: MemoryState,
) -> None:
    await admit(state)
    await run(state, accounting.response_ops(Usage(1000, 200), 0.25))
    facts, _ = accounting.facts_from(await admit(state, NOW + 1, "b2"))
    assert (facts.in_flight, facts.usd, facts.input_tokens, facts.output_tokens) == (1, 0.25, 1000, 200)
    assert (facts.key_day_usd, facts.last_input_tokens) == (0.25, 1000)


async def test_a_request_that_never_got_a_response_still_gives_its_slot_back(state: MemoryState) -> None:
    await admit(state)
    await run(state, accounting.release_ops())
    assert accounting.usage_ops(None, 0.0) == []
    assert accounting.facts_from(await admit(state, NOW + 1))[0].in_flight == 1


async def test_the_same_body_twice_in_a_row_is_a_duplicate(state: MemoryState) -> None:
    await admit(state, body="same")
    assert accounting.facts_from(await admit(state, NOW + 1, "same"))[0].duplicate
    assert not accounting.facts_from(await admit(state, NOW + 2, "other"))[0].duplicate


async def test_the_time_of_the_run_s_previous_request_is_read_back(state: MemoryState) -> None:
    first = await admit(state)
    assert accounting.last_seen_from(first[accounting.REQUEST_OPS]) == 0
    later = await admit(state, NOW + 30)
    assert accounting.last_seen_from(later[accounting.REQUEST_OPS]) == NOW


async def test_warnings_and_a_nudge_s_note_wait_for_the_run_s_next_request_once(state: MemoryState) -> None:
    await admit(state)
    await run(
        state,
        [
            *accounting.carry_ops("loop_detector (previous response): same call"),
            *accounting.nudge_ops(["repeat_output"], "You repeated yourself."),
        ],
    )
    taken = await admit(state, NOW + 1)
    assert accounting.carried_from(taken) == "loop_detector (previous response): same call"
    assert accounting.note_from(taken) == "You repeated yourself."
    assert accounting.nudged_from(taken) == frozenset({"repeat_output"})
    again = await admit(state, NOW + 2)
    assert accounting.carried_from(again) is None and accounting.note_from(again) is None
    assert accounting.nudged_from(again) == frozenset({"repeat_output"})  # nudged stays known


async def test_the_breakers_of_the_request_s_scopes_are_read_with_its_batch(state: MemoryState) -> None:
    record = breaker.trip(
        None, detector="budget", reason="spent", now=NOW, request_index=3, base_cooldown=30, max_cooldown=300
    )
    await run(state, [Put(Scope.KEY, breaker.FIELD, record.dumps())])
    _, breakers = accounting.facts_from(await admit(state))
    assert breakers.key == record and breakers.run is None and breakers.key_model is None
    assert breakers.of(Scope.KEY_DAY) == record  # a day's budget opens the key's breaker
