"""`session_bloat`: a run's first request already carrying a long history."""

from __future__ import annotations

from runguard.detectors.session_bloat import SessionBloat
from tests.detectors.harness import RunSimulator, Step, request


async def test_first_request_with_long_prior_history_is_stopped() -> None:
    sim = RunSimulator([SessionBloat()])
    result = await sim.step(Step(request(assistant_turns=12, history_chars=60_001, message_count=25)))
    finding = result.one("session_bloat")
    assert finding.blocking
    assert "60,001 characters" in finding.verdict.reason


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
