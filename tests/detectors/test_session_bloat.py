"""`session_bloat`: a run's first request already carrying a long history."""

from __future__ import annotations

from runguard.detectors.session_bloat import SessionBloat
from runguard.proxy.core.ops import Scope
from tests.detectors.harness import Rig, RunSimulator, Step, request, shows


def forgetting(run_id: str = "chat-1") -> RunSimulator:
    """A run through a guard that forgets a run idle for 60 s, and its trace after a day (`runs` settings)."""
    rig = Rig.of([SessionBloat()], idle_seconds=60.0, remember_seconds=86_400.0)
    return RunSimulator(rig, run_id=run_id)


def chat_turn(turns: int) -> Step:
    """A chat's request after `turns` exchanges of 3,000 characters each."""
    return Step(request(assistant_turns=turns, history_chars=3_000 * turns + 500, message_count=2 * turns + 1))


async def test_first_request_with_long_prior_history_is_stopped() -> None:
    sim = RunSimulator([SessionBloat()])
    result = await sim.step(Step(request(assistant_turns=12, history_chars=60_001, message_count=25)))
    finding = result.one("session_bloat")
    shows(finding, "value", "limit")
    assert finding.action == "block"
    assert "60,001 characters" in finding.reason


async def test_exactly_at_the_limit_passes() -> None:
    sim = RunSimulator([SessionBloat()])
    result = await sim.step(Step(request(assistant_turns=12, history_chars=60_000)))
    assert not result.tripped()


async def test_first_request_with_a_big_user_document_and_no_prior_turns_passes() -> None:
    sim = RunSimulator([SessionBloat()])
    result = await sim.step(Step(request(assistant_turns=0, history_chars=400_000)))
    assert not result.tripped()


async def test_later_requests_are_not_judged() -> None:
    sim = RunSimulator([SessionBloat()])
    results = await sim.run([Step(request(assistant_turns=i, history_chars=50_000 + 20_000 * i)) for i in range(4)])
    assert not any(r.tripped() for r in results)


async def test_a_long_chat_resumed_after_its_run_was_forgotten_is_not_judged() -> None:
    """A chat named by its conversation id, back after lunch: the proxy forgot the run, not that it saw it."""
    sim = forgetting()
    assert not any(r.tripped() for r in await sim.run([chat_turn(turns) for turns in range(1, 25)]))
    sim.clock.now += 3 * 3600
    resumed = await sim.step(chat_turn(25))
    assert resumed.facts.request_index == 1  # the run's state was forgotten
    assert not resumed.tripped()


async def test_a_run_forgotten_longer_than_its_trace_lives_is_judged_again() -> None:
    sim = forgetting()
    await sim.run([chat_turn(turns) for turns in range(1, 25)])
    sim.clock.now += 2 * 86_400
    assert (await sim.step(chat_turn(25))).tripped("session_bloat")


async def test_a_run_traced_only_while_its_conversation_was_short_is_judged_when_it_opens_long() -> None:
    sim = forgetting()
    await sim.run([chat_turn(turns) for turns in range(1, 5)])  # 12,500 characters: under a quarter of the limit
    assert await sim.run_fields(Scope.RUN_TRACE) == {}
    sim.clock.now += 3 * 3600
    assert (await sim.step(chat_turn(25))).tripped("session_bloat")


async def test_an_earlier_session_loaded_into_a_new_run_is_judged_though_its_source_was_traced() -> None:
    """The seed's accident: each day's invocation is a new run that re-loads every earlier day's history."""
    yesterday = forgetting("job-day-1")
    await yesterday.run([chat_turn(turns) for turns in range(1, 25)])
    yesterday.clock.now += 3600
    today = yesterday.another_run("job-day-2")
    assert (await today.step(chat_turn(25))).tripped("session_bloat")
