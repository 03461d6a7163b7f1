"""200 concurrent streams through one proxy: every one completes, is relayed whole and recorded once."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import orjson

from tests.e2e import payloads
from tests.e2e.faults import eventually, proxy, requests_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

STREAMS = 200
TEXT = "streamed under load"


async def test_200_concurrent_streams_are_all_relayed_and_recorded(upstream: FakeUpstream) -> None:
    all_open = asyncio.Event()  # each stream sends one event, then waits until all 200 are open

    def script(_: Received) -> Reply:
        if len(upstream.received) == STREAMS:
            all_open.set()
        return Reply.sse(payloads.chat_stream(TEXT, with_usage=True), hold=all_open)

    upstream.script = script
    sink = ListSink()
    async with proxy(upstream.url, sink) as url:
        client = openai.AsyncOpenAI(
            base_url=url + "/v1",
            api_key="sk-load-0123456789",
            max_retries=0,
            http_client=httpx.AsyncClient(limits=httpx.Limits(max_connections=STREAMS)),
        )

        async def one(n: int) -> str:
            stream = await client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": f"agent {n}"}],
                stream=True,
                stream_options={"include_usage": True},
                extra_headers={"X-Run-Id": f"load-{n}"},
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        async with asyncio.timeout(60):  # a proxy that queued streams behind a pool limit would hang here
            texts = await asyncio.gather(*(one(n) for n in range(STREAMS)))
        await eventually(lambda: len(requests_of(sink)) == STREAMS)
        metrics = (await client.with_options(base_url=url).get("/runguard/metrics", cast_to=httpx.Response)).text
        await client.close()

    assert texts == [TEXT] * STREAMS
    assert upstream.max_in_flight == STREAMS  # open side by side
    records = requests_of(sink)
    assert sorted(r.run_id for r in records) == sorted(f"load-{n}" for n in range(STREAMS))
    assert all(r.status == 200 and not r.usage_estimated and r.blocked_by is None for r in records)
    assert "runguard_in_flight_requests 0.0" in metrics


async def test_five_samples_of_one_prompt_sent_at_once_are_all_answered(upstream: FakeUpstream) -> None:
    """Self-consistency: the same question five times at once, to take a vote. Identical bodies in flight
    together are not retries (`duplicate_request` stopped the 4th and the 5th)."""
    upstream.script = lambda _: Reply(200, orjson.dumps(payloads.chat_completion("42")), delay=0.2)
    sink = ListSink()
    async with proxy(upstream.url, sink) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-votes", max_retries=0)
        question: list[Any] = [{"role": "user", "content": "What is 6 * 7? Think step by step."}]
        try:
            answers = await asyncio.gather(
                *(client.chat.completions.create(model="gpt-4o", messages=question, temperature=1) for _ in range(5))
            )
        finally:
            await client.close()
    assert [a.choices[0].message.content for a in answers] == ["42"] * 5
    await eventually(lambda: len(requests_of(sink)) == 5)
    assert {r.blocked_by for r in requests_of(sink)} == {None}
