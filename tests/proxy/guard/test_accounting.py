"""The guard's own counters, run on a real state backend as the guard runs them: a request's first batch
counts it and reads the run's totals and breakers; its response adds usage and cost and frees its slot."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from runguard.proxy.core.events import Usage
from runguard.proxy.core.ops import Op, OpResult, Put, Scope
from runguard.proxy.guard import accounting, breaker
from runguard.proxy.guard.breaker import BreakerRecord, BreakerState
from runguard.proxy.guard.ticket import scope_ids
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState

IDS = ScopeIds(run="run-1", key="k_1", key_model="k_1:gpt-4o", key_day="k_1:2026-11-28")


OTHER_RUN = ScopeIds(run="run-2", key="k_1", key_model="k_1:gpt-4o", key_day="k_1:2026-11-28")


async def _request(state: MemoryState, now: float, body: str = "b", ids: ScopeIds = IDS) -> Sequence[OpResult]:
    return await state.execute(ids, accounting.request_ops(now, body))


async def test_the_first_request_of_a_run_knows_nothing_but_itself() -> None:
    results = await _request(MemoryState(), 1000.0)
    assert len(results) == accounting.REQUEST_OPS
    facts, breakers = accounting.facts_from(results)
    assert (facts.request_index, facts.started_at, facts.in_flight) == (1, 1000.0, 1)
    assert (facts.usd, facts.input_tokens, facts.output_tokens, facts.key_day_usd) == (0.0, 0, 0, 0.0)
    assert (facts.last_input_tokens, facts.duplicate) == (0, False)
    assert breakers == accounting.Breakers(None, None, None)
    assert accounting.carried_from(results) is None
    assert accounting.nudged_from(results) == frozenset()
    assert accounting.note_from(results) is None


async def test_responses_add_up_for_the_run_and_the_key_s_day() -> None:
    state = MemoryState()
    await _request(state, 1000.0)
    await state.execute(IDS, accounting.response_ops(Usage(input_tokens=1200, output_tokens=80), 0.25))
    await _request(state, 1001.0, ids=OTHER_RUN)
    await state.execute(OTHER_RUN, accounting.response_ops(Usage(input_tokens=10, output_tokens=5), 0.5))
    facts, _ = accounting.facts_from(await _request(state, 1002.0, body="c"))
    assert (facts.request_index, facts.started_at, facts.in_flight) == (2, 1000.0, 1)
    assert (facts.usd, facts.input_tokens, facts.output_tokens) == (0.25, 1200, 80)
    assert facts.key_day_usd == 0.75  # both runs of the key
    assert facts.last_input_tokens == 1200


async def test_a_request_without_a_response_still_frees_its_slot_and_adds_nothing() -> None:
    state = MemoryState()
    await _request(state, 1.0)
    await _request(state, 2.0, body="c")  # two in flight now
    await state.execute(IDS, accounting.release_ops())
    await state.execute(IDS, accounting.response_ops(None, 0.0))
    facts, _ = accounting.facts_from(await _request(state, 3.0, body="d"))
    assert facts.in_flight == 1
    assert facts.usd == 0.0 and facts.input_tokens == 0
    assert accounting.usage_ops(None, 1.0) == []


async def test_the_same_body_twice_in_a_row_is_a_duplicate() -> None:
    state = MemoryState()
    first, _ = accounting.facts_from(await _request(state, 1.0, body="same"))
    second, _ = accounting.facts_from(await _request(state, 2.0, body="same"))
    third, _ = accounting.facts_from(await _request(state, 3.0, body="other"))
    assert (first.duplicate, second.duplicate, third.duplicate) == (False, True, False)


async def test_breaker_records_of_each_scope_are_read_and_key_day_reads_the_key_s() -> None:
    state = MemoryState()
    record = BreakerRecord(BreakerState.OPEN, 5.0, 60.0, 1, "spend_rate", "fast", latched=False)
    await state.execute(IDS, [Put(Scope.KEY, breaker.FIELD, record.dumps())])
    _, breakers = accounting.facts_from(await _request(state, 10.0))
    assert breakers.key == record and breakers.run is None and breakers.key_model is None
    assert breakers.of(Scope.KEY) == record and breakers.of(Scope.KEY_DAY) == record
    assert breakers.of(Scope.RUN) is None


async def test_warnings_and_a_note_wait_for_the_run_s_next_request_and_are_taken_once() -> None:
    state = MemoryState()
    await _request(state, 1.0)
    ops: list[Op] = [*accounting.carry_ops("loop: 3 same calls"), *accounting.nudge_ops(["spiral"], "change course")]
    await state.execute(IDS, ops)
    await state.execute(IDS, accounting.nudge_ops(["spiral", "text_loop"], None))
    taken = await _request(state, 2.0)
    assert accounting.carried_from(taken) == "loop: 3 same calls"
    assert accounting.note_from(taken) == "change course"
    assert accounting.nudged_from(taken) == {"spiral", "text_loop"}
    again = await _request(state, 3.0, body="c")
    assert accounting.carried_from(again) is None and accounting.note_from(again) is None
    assert accounting.nudged_from(again) == {"spiral", "text_loop"}  # a nudge is remembered for the run


async def test_seen_op_gives_the_time_of_the_run_s_previous_request() -> None:
    state = MemoryState()
    (first,) = await state.execute(IDS, [accounting.seen_op(100.0)])
    (second,) = await state.execute(IDS, [accounting.seen_op(160.0)])
    assert (accounting.last_seen_from(first), accounting.last_seen_from(second)) == (0.0, 100.0)


def test_unknown_facts_say_nothing_of_the_run() -> None:
    facts = accounting.UNKNOWN_FACTS
    assert (facts.request_index, facts.usd, facts.in_flight, facts.duplicate) == (0, 0.0, 0, False)


NOW = 1_000_000.0


SCOPE_IDS = scope_ids("k_a/run-1", "k_a", "gpt-4o-mini", NOW)


@pytest.fixture
def state() -> MemoryState:
    return MemoryState()


async def run(state: MemoryState, ops: Sequence[Op]) -> list[OpResult]:
    return await state.execute(SCOPE_IDS, ops)


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


async def test_the_same_body_twice_in_a_row_counts_as_a_duplicate(state: MemoryState) -> None:
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
