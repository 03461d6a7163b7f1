"""`max_tokens`: the run's token cap."""

from __future__ import annotations

from runguard.detectors.max_tokens import MaxTokens, MaxTokensConfig
from tests.detectors.harness import RunSimulator, Step, first_trip, request, response, shows


async def test_the_request_after_tokens_reach_the_limit_is_stopped() -> None:
    sim = RunSimulator([(MaxTokens(), MaxTokensConfig(limit=1000))])
    steps = [Step(request(), response(input_tokens=300, output_tokens=50)) for _ in range(5)]
    results = await sim.run(steps)
    # 700 tokens after two responses, 1050 after three: the 4th request is stopped.
    assert first_trip(results) == 4
    assert results[3].one("max_tokens").evidence["tokens"] == 1050
    assert shows(results[3].one("max_tokens"), "value", "limit")["value"] == 1050


async def test_default_leaves_room_for_a_long_run_with_large_contexts() -> None:
    sim = RunSimulator([MaxTokens()])
    steps = [Step(request(), response(input_tokens=25_000, output_tokens=500)) for _ in range(60)]
    assert first_trip(await sim.run(steps)) is None
    assert "10-30k" in (MaxTokensConfig.model_fields["limit"].description or "")
