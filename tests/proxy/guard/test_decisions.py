"""What the guard does with what it found: the local answer, the breaker gate and its probes, trips and warnings."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from runguard.detectors.registry import default_detectors
from runguard.detectors.support.base import RequestSeen, ResponseKind, Verdict
from runguard.proxy.core.events import AgentIdentity, Api, RequestInfo
from runguard.proxy.core.ops import Get, Put, Scope
from runguard.proxy.guard import accounting, breaker
from runguard.proxy.guard.batches import Batches
from runguard.proxy.guard.decisions import Decisions
from runguard.proxy.guard.lineup.engine import Finding
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.observer import NullObserver
from runguard.proxy.guard.ticket import Ticket, scope_ids
from runguard.proxy.providers.answers import StopNotice
from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.gemini.adapter import GeminiAdapter
from runguard.proxy.providers.openai_chat.adapter import ChatAdapter
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import TripRecord
from tests.support.guards import guard_settings
from tests.support.proxy import ListSink

NOW = 1_000_000.0
NOTICE = StopNotice("loop_detector", "run-1", "the same call 5 times", "Reset with: runguard-proxy reset run-1")


class Clock:
    now = NOW

    def __call__(self) -> float:
        return self.now


class Setup:
    def __init__(self, **guard: Any) -> None:
        self.settings = guard_settings(guard=guard)
        self.state = MemoryState()
        self.sink = ListSink()
        self.clock = Clock()
        batches = Batches(self.state, fail_closed=False, clock=self.clock, on_error=lambda: None)
        policy = Policy(default_detectors(), self.settings.guard)
        self.decisions = Decisions(self.settings, policy, batches, self.sink, NullObserver(), self.clock)

    async def breaker_of(self, ticket: Ticket, scope: Scope) -> breaker.BreakerRecord | None:
        (raw,) = await self.state.execute(ticket.ids, [Get(scope, breaker.FIELD)])
        return breaker.BreakerRecord.loads(raw)

    async def open(self, ticket: Ticket, scope: Scope, *, latched: bool = False, cooldown: float = 60.0) -> None:
        record = breaker.trip(
            None,
            detector="loop_detector",
            reason="same call 5 times",
            now=self.clock.now,
            request_index=7,
            base_cooldown=cooldown,
            max_cooldown=cooldown * 10,
            latched=latched,
        )
        await self.state.execute(ticket.ids, [Put(scope, breaker.FIELD, record.dumps())])


def ticket(adapter: Adapter | None = None, stream: bool = False) -> Ticket:
    request = RequestInfo(Api.CHAT, "gpt-4o-mini", stream, AgentIdentity(None, "f"))
    ids = scope_ids("k_a/run-1", "k_a", "gpt-4o-mini", NOW)
    seen = RequestSeen("run-1", "k_a", NOW, request, 128_000)
    return Ticket("run-1", "k_a", ids, seen, adapter or ChatAdapter(), tenant="k_a")


def finding(blocking: bool, scope: Scope = Scope.RUN, kind: ResponseKind = ResponseKind.ERROR) -> Finding:
    return Finding(Verdict("loop_detector", "the same call 5 times", scope=scope), blocking=blocking, response=kind)


def test_a_stop_answer_is_a_stop_completion_where_the_dialect_has_one_else_an_error() -> None:
    decisions = Setup().decisions
    stop = decisions.answer(ticket(), NOTICE, ResponseKind.STOP)
    assert stop.status == 200 and b"the same call 5 times" in stop.body
    error = decisions.answer(ticket(), NOTICE, ResponseKind.ERROR)
    assert error.status == 429
    assert orjson.loads(error.body)["error"]["code"] == "runguard_loop_detector"


@pytest.mark.parametrize("status", [429, 400])
def test_gemini_s_error_status_is_the_configured_one(status: int) -> None:
    decisions = Setup(gemini_error_status=status).decisions
    assert decisions.answer(ticket(GeminiAdapter()), NOTICE, ResponseKind.ERROR).status == status


def test_stopping_names_the_detector_and_the_reset_for_its_scope() -> None:
    t = ticket()
    answer = Setup().decisions.stop(t, finding(True, Scope.KEY))
    assert t.blocked_by == "loop_detector" and b"--key k_a" in answer.body


async def test_an_open_breaker_answers_locally_and_says_when_to_come_back() -> None:
    setup, t = Setup(), ticket()
    await setup.open(t, Scope.RUN, cooldown=60.0)
    setup.clock.now += 20.5
    await setup.decisions.gate(t, await setup.decisions.breakers(t))
    assert t.answer is not None and t.answer.status == 429 and t.blocked_by == "loop_detector"
    assert t.answer.headers["Retry-After"] == "40"  # whole seconds, never early
    assert b"breaker open since request 7" in t.answer.body


async def test_a_latched_run_is_answered_until_reset_with_no_time_to_come_back() -> None:
    setup, t = Setup(), ticket()
    await setup.open(t, Scope.RUN, latched=True)
    setup.clock.now += 10_000
    await setup.decisions.gate(t, await setup.decisions.breakers(t))
    assert t.answer is not None and "Retry-After" not in t.answer.headers
    assert b"it stays stopped until reset" in t.answer.body


async def test_once_its_cooldown_is_over_one_request_probes_and_can_give_the_probe_back() -> None:
    setup = Setup()
    first, second = ticket(), ticket()
    await setup.open(first, Scope.KEY, cooldown=30.0)
    setup.clock.now += 31
    await setup.decisions.gate(first, await setup.decisions.breakers(first))
    assert first.answer is None and first.probes == (Scope.KEY,) and len(first.probe_undo) == 1
    await setup.decisions.gate(second, await setup.decisions.breakers(second))
    assert second.answer is not None  # one probe at a time
    await setup.state.execute(first.ids, first.probe_undo)  # the probe never went upstream
    third = ticket()
    await setup.decisions.gate(third, await setup.decisions.breakers(third))
    assert third.answer is None and third.probes == (Scope.KEY,)


async def test_a_warning_is_a_trip_and_a_warning_and_answers_nothing() -> None:
    setup, t = Setup(), ticket()
    none = accounting.Breakers(None, None, None)
    assert await setup.decisions.act(t, [finding(False)], none, None) is None
    assert t.answer is None and [w.detector for w in t.warnings] == ["loop_detector"]
    (trip,) = [r for r in setup.sink.records if isinstance(r, TripRecord)]
    assert trip.detector == "loop_detector"
    assert await setup.breaker_of(t, Scope.RUN) is None


async def test_a_blocking_finding_opens_its_breaker_and_answers_only_before_the_response() -> None:
    setup = Setup()
    none = accounting.Breakers(None, None, None)
    before, after = ticket(), ticket()
    blocking = await setup.decisions.act(before, [finding(True, kind=ResponseKind.STOP)], none, None)
    assert blocking is not None and before.answer is not None and before.answer.status == 200
    assert before.blocked_by == "loop_detector"
    opened = await setup.breaker_of(before, Scope.RUN)
    assert opened is not None and opened.detector == "loop_detector"
    await setup.decisions.act(after, [finding(True, Scope.KEY_DAY)], none, None, answers=False)
    assert after.answer is None
    assert await setup.breaker_of(after, Scope.KEY) is not None  # a day's finding opens the key's breaker
