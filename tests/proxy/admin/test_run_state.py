"""A run's live state as the admin API documents it: the guard's counters by name, detectors by name only
(their fields are hashes), a breaker as its documented fields; nothing at all for a run the state forgot."""

from __future__ import annotations

from runguard.proxy.admin.run_state import breaker_view, live_view
from runguard.proxy.core.events import Usage
from runguard.proxy.core.ops import Push, Put, Scope
from runguard.proxy.guard import accounting, breaker
from runguard.proxy.guard.breaker import BreakerRecord, BreakerState
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState

IDS = ScopeIds(run="run-1", key="k_1", key_model="k_1:m", key_day="k_1:d")
OPEN = BreakerRecord(BreakerState.OPEN, 1000.0, 60.0, 2, "spend_rate", "$5 in 60 s", request_index=7)


async def test_the_guard_s_counters_read_back_by_their_documented_names() -> None:
    state = MemoryState()
    await state.execute(IDS, [*accounting.request_ops(1000.0, "b1"), accounting.seen_op(1000.0)])
    await state.execute(IDS, accounting.response_ops(Usage(input_tokens=900, output_tokens=30), 0.0123456789))
    await state.execute(IDS, [*accounting.request_ops(1010.5, "b2"), accounting.seen_op(1010.5)])
    await state.execute(IDS, accounting.carry_ops("context at 71%"))
    await state.execute(IDS, [Push(Scope.RUN, "spiral.w.419d7576", ("a",), keep=4), Put(Scope.RUN, "text_loop.n", "3")])
    live = live_view(await state.read_scope(Scope.RUN, IDS.run))
    assert live == {
        "requests": 2,
        "started_at": 1000.0,
        "last_request_at": 1010.5,
        "usd": 0.012346,
        "input_tokens": 900,
        "output_tokens": 30,
        "in_flight": 1,
        "last_input_tokens": 900,
        "pending_warning": "context at 71%",
        "detectors_with_state": ["spiral", "text_loop"],
    }


def test_fields_not_written_yet_read_as_zero_and_odd_values_do_not_break_the_view() -> None:
    live = live_view({"core.requests": "1", "core.usd": "not a number", "core.warned": ""})
    assert live is not None
    assert (live["requests"], live["usd"], live["in_flight"], live["started_at"]) == (1, 0.0, 0, 0.0)
    assert live["pending_warning"] is None and live["detectors_with_state"] == []


def test_a_run_the_state_holds_nothing_of_has_no_live_view() -> None:
    assert live_view({}) is None
    assert live_view({breaker.FIELD: OPEN.dumps()}) is None  # only a breaker: the run's counters are gone


def test_no_breaker_record_is_a_closed_breaker() -> None:
    assert breaker_view(None) == {"state": "closed"}


def test_an_open_breaker_says_when_it_reopens_unless_it_is_latched() -> None:
    assert breaker_view(OPEN) == {
        "state": "open",
        "detector": "spend_rate",
        "reason": "$5 in 60 s",
        "opened_at": 1000.0,
        "cooldown_s": 60.0,
        "latched": False,
        "reopens_at": 1060.0,
        "trips": 2,
        "request_index": 7,
    }
    latched = BreakerRecord(BreakerState.OPEN, 1000.0, 60.0, 1, "spiral", "loop", latched=True)
    assert breaker_view(latched)["reopens_at"] is None
    assert breaker_view(latched)["latched"] is True
