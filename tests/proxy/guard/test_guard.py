"""The guard when its state backend fails: a request let through (fail open) still counts what it cost.

The proxy runs in-process on loopback with the openai SDK as its client and an
in-memory state whose next batches fail as a Redis outage makes them fail.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import openai
import pytest

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.ops import Op, OpResult, Scope
from runguard.proxy.runs import tenants
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

RUN = "outage-run"
RUN_STATE = tenants.state_id(KeyHasher(b"test-salt").hash("sk-outage"), RUN)  # the key's run (`tenants`)
ASK: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "find the invoice"}]}
USD = 1000 * 0.15e-6 + 200 * 0.6e-6  # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output


class FailingState(MemoryState):
    """The in-memory state, whose next `failures` batches fail as they do while Redis is down."""

    failures = 0

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        if self.failures:
            self.failures -= 1
            raise StateUnavailable("state backend down (test)")
        return await super().execute(ids, ops)


@pytest.fixture
def state() -> FailingState:
    return FailingState()


@pytest.fixture
async def client(upstream: FakeUpstream, sink: ListSink, state: FailingState) -> AsyncIterator[openai.AsyncOpenAI]:
    running = await start_proxy(settings_for(upstream.url), sink=sink, state=state)
    yield openai.AsyncOpenAI(
        base_url=running.url + "/v1", api_key="sk-outage", default_headers={"X-Run-Id": RUN}, max_retries=0
    )
    await running.stop()


async def _records(sink: ListSink, count: int) -> list[RequestRecord]:
    """The request records, once there are `count` (each is written once its request is complete)."""
    await eventually(lambda: len(requests_of(sink)) >= count)
    return requests_of(sink)


def _day(record: RequestRecord) -> str:
    return f"{record.key_hash}|{time.strftime('%Y-%m-%d', time.gmtime(record.at))}"


async def test_a_request_let_through_while_the_state_failed_still_counts_and_records_its_spend(
    upstream: FakeUpstream, sink: ListSink, state: FailingState, client: openai.AsyncOpenAI
) -> None:
    call = ("call_1", "search_invoices", '{"query": "invoice total"}')
    upstream.script = lambda _: Reply.json(payloads.chat_completion(tool_calls=[call], usage=(1000, 200)))
    state.failures = 1  # the request step of the next request: the guard fails open
    done = await client.chat.completions.create(**ASK)
    assert done.choices[0].message.tool_calls  # let through, unguarded
    (record,) = await _records(sink, 1)
    assert (record.input_tokens, record.output_tokens) == (1000, 200)
    assert record.usd == pytest.approx(USD)
    assert record.tool_calls == ("search_invoices",)
    run = await state.read_scope(Scope.RUN, RUN_STATE)
    assert (run["core.in"], run["core.out"], run["core.usd"]) == (1000.0, 200.0, pytest.approx(USD))
    assert "core.requests" not in run and "core.inflight" not in run  # the step that counts those failed
    assert (await state.read_scope(Scope.KEY_DAY, _day(record)))["core.usd"] == pytest.approx(USD)

    await client.chat.completions.create(**ASK)  # the state answers again: guarded as usual
    _, second = await _records(sink, 2)
    assert second.index == 1  # the first request the run's counters saw
    run = await state.read_scope(Scope.RUN, RUN_STATE)
    assert run["core.in"] == 2000.0 and run["core.usd"] == pytest.approx(2 * USD)
    assert run["core.inflight"] == 0.0


async def test_a_stream_let_through_while_the_state_failed_records_its_estimated_usage(
    upstream: FakeUpstream, sink: ListSink, state: FailingState, client: openai.AsyncOpenAI
) -> None:
    upstream.script = lambda _: Reply.sse(payloads.chat_stream("the invoice total is 42 euros"))
    state.failures = 1
    stream = await client.chat.completions.create(**ASK, stream=True)
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert text == "the invoice total is 42 euros"
    (record,) = await _records(sink, 1)
    assert record.usage_estimated and record.input_tokens > 0 and record.output_tokens > 0
    assert record.usd > 0
    run = await state.read_scope(Scope.RUN, RUN_STATE)
    assert run["core.out"] == float(record.output_tokens) and run["core.usd"] == pytest.approx(record.usd)


async def test_a_model_no_table_knows_is_recorded_unpriced_never_at_zero_or_another_price(
    upstream: FakeUpstream, sink: ListSink, client: openai.AsyncOpenAI
) -> None:
    served = payloads.chat_completion(usage=(1000, 200), model="acme-coder-9")  # the model it was asked for
    upstream.script = lambda _: Reply.json(served)
    await client.chat.completions.create(**{**ASK, "model": "acme-coder-9"})
    upstream.script = lambda _: Reply.json(payloads.chat_completion(usage=(1000, 200)))
    await client.chat.completions.create(**ASK)
    unknown, known = await _records(sink, 2)
    assert unknown.model == "acme-coder-9" and unknown.unpriced and unknown.usd == 0.0
    assert not known.unpriced and known.usd == pytest.approx(USD)
