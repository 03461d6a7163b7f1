"""`spend_rate` through the real proxy: a fan-out of parallel gpt-4o sub-agents with long contexts is stopped
by its pace, rounds before its budget would have stopped it; the same fan-out on gpt-4o-mini runs on."""

from __future__ import annotations

import asyncio

import openai
import pytest

from tests.conftest import SdkClient
from tests.e2e import payloads
from tests.e2e.faults import eventually, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

WIDTH = 6  # sub-agents asked at once each round
CONTEXT = 85_000  # input tokens of each sub-agent's request (two thirds of the window)


def answering(received: Received) -> Reply:
    """Each sub-agent answers, billed for a long context: $0.22 a request on gpt-4o, $0.013 on gpt-4o-mini."""
    model = received.json()["model"]
    return Reply.json(payloads.chat_completion("Section drafted.", usage=(CONTEXT, 1000), model=model))


async def rounds(client: openai.AsyncOpenAI, model: str, count: int) -> int:
    """`count` rounds of WIDTH parallel sub-agent requests; how many rounds ran before one was stopped."""
    for done in range(count):
        asks = [
            client.chat.completions.create(
                model=model,
                messages=[
                    {"role": "system", "content": f"You are writer {i}. Draft your section of the report."},
                    {"role": "user", "content": f"Round {done}: draft section {i}."},
                ],
            )
            for i in range(WIDTH)
        ]
        answers = await asyncio.gather(*asks, return_exceptions=True)
        stops = [a for a in answers if isinstance(a, openai.RateLimitError)]
        if stops:
            assert all(s.code == "runguard_spend_rate" for s in stops), [s.code for s in stops]
            return done
        assert not [a for a in answers if isinstance(a, BaseException)]
    return count


async def test_a_fan_out_spending_its_budget_within_a_minute_is_stopped_by_its_pace(
    upstream: FakeUpstream, make_proxy: object, sink: ListSink, sdk_client: SdkClient
) -> None:
    upstream.script = answering
    client = sdk_client(await make_proxy(), "sk-test-pace", {"X-Run-Id": "report-fan-out"})  # type: ignore[operator]
    # Round 1 spends $1.34, round 2 $2.67 in all (over $2.50 a minute): round 3 is stopped. The $5 budget alone
    # would have let rounds 3 and 4 start (judged on the $2.67, then $4.01, already back).
    assert await rounds(client, "gpt-4o", 5) == 2
    assert len(upstream.received) == 2 * WIDTH
    await eventually(lambda: any(t.detector == "spend_rate" for t in trips_of(sink)))
    trip = next(t for t in trips_of(sink) if t.detector == "spend_rate")
    assert trip.evidence["value"] >= 2.5 and trip.evidence["limit"] == 2.5


async def test_the_same_fan_out_on_a_small_model_runs_on(
    upstream: FakeUpstream, make_proxy: object, sink: ListSink, sdk_client: SdkClient
) -> None:
    upstream.script = answering
    client = sdk_client(await make_proxy(), "sk-test-pace", {"X-Run-Id": "report-fan-out-mini"})  # type: ignore[operator]
    assert await rounds(client, "gpt-4o-mini", 3) == 3  # $0.08 a round (three: the run's 2M-token cap is near)
    assert not [t for t in trips_of(sink) if t.action == "block"]


@pytest.mark.parametrize("limit", [None, 2.0])
async def test_a_key_limit_counts_the_runs_of_the_key(
    upstream: FakeUpstream, make_proxy: object, sink: ListSink, sdk_client: SdkClient, limit: float | None
) -> None:
    """Three runs of one key, $1.34 each in the same minute: under each run's limit; over a key limit of $2."""
    upstream.script = answering
    url = await make_proxy(guard={"detectors": {"spend_rate": {"key_usd_per_minute": limit}}})  # type: ignore[operator]
    ran = [await rounds(sdk_client(url, "sk-test-pace-key", {"X-Run-Id": f"user-{n}"}), "gpt-4o", 1) for n in range(3)]
    if limit is None:
        assert ran == [1, 1, 1]
    else:
        assert ran[:2] == [1, 1] and ran[2] == 0  # the key passed $2.00 a minute with the second run
