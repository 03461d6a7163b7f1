"""Trip records: the spend so far a trip reports, in USD and in tokens, covers the same requests."""

from __future__ import annotations

import openai
import pytest

from runguard.detectors.tool_storm import ToolStorm
from tests.e2e import payloads
from tests.e2e.faults import eventually, trips_of
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

USD = 1000 * 0.15e-6 + 200 * 0.6e-6  # one gpt-4o-mini response of 1000 input and 200 output tokens


async def test_a_trip_after_a_response_counts_its_tokens_as_it_counts_its_cost(upstream: FakeUpstream) -> None:
    call = ("call_1", "search", '{"q": "invoices"}')
    upstream.script = lambda _: Reply.json(payloads.chat_completion(tool_calls=[call], usage=(1000, 200)))
    sink = ListSink()
    settings = settings_for(upstream.url, guard={"detectors": {"tool_storm": {"threshold": 2}}})
    running = await start_proxy(settings, sink=sink, detectors=[ToolStorm()])
    sdk = openai.AsyncOpenAI(
        base_url=running.url + "/v1", api_key="sk-test", default_headers={"X-Run-Id": "r-spend"}, max_retries=0
    )
    try:
        for _ in range(2):  # the second response makes the second call of `search`: tool_storm warns
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}])
        await eventually(lambda: len(trips_of(sink)) == 1)
    finally:
        await sdk.close()
        await running.stop()
    (trip,) = trips_of(sink)
    assert (trip.detector, trip.request_index) == ("tool_storm", 2)
    assert trip.usd_so_far == pytest.approx(2 * USD)
    assert trip.tokens_so_far == 2 * 1200
