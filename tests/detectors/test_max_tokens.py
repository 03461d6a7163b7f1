"""`max_tokens`: the run's token cap."""

from __future__ import annotations

import dataclasses

from runguard.detectors.max_tokens import MaxTokens, MaxTokensConfig
from runguard.proxy.core.events import Usage
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


def cli_step(context: int, cached: int) -> Step:
    """One request of a coding-agent CLI: its whole context re-sent, most of it read from the prompt cache."""
    answer = dataclasses.replace(response(), usage=Usage(context, 400, cached_tokens=cached))
    return Step(request(), answer)


async def test_a_cli_session_re_sending_a_cached_context_is_not_stopped_at_its_120th_call() -> None:
    """60k tokens a request, 86% cache reads (as recorded): 2M raw tokens by the 34th call; weighed at the
    cache-read price, 1.68M after 120 (the longest recorded session, 5.35M raw in 142 calls, weighs 1.2M)."""
    steps = [cli_step(60_000, 51_600) for _ in range(120)]
    assert first_trip(await RunSimulator([MaxTokens()]).run(steps)) is None


async def test_cache_reads_count_at_their_weight_and_fresh_tokens_in_full() -> None:
    config = MaxTokensConfig(limit=10_000)
    cached = [cli_step(5_000, 4_000) for _ in range(8)]  # 1,800 weighed a response: 10,800 after 6
    results = await RunSimulator([(MaxTokens(), config)]).run(cached)
    assert first_trip(results) == 7
    assert results[6].one("max_tokens").evidence["cached_tokens"] == 24_000
    fresh = [cli_step(5_000, 0) for _ in range(4)]
    assert first_trip(await RunSimulator([(MaxTokens(), config)]).run(fresh)) == 3
    full = MaxTokensConfig(limit=10_000, cached_weight=1)
    assert first_trip(await RunSimulator([(MaxTokens(), full)]).run(cached)) == 3
