"""What the proxy records of real SDK traffic: one request record per request, numbered in its run, a trip
record for the stop; ids, hashes, counts and costs only, never the API key nor any message content (unless
`store.record_bodies` asks for the bodies, which then carry no key)."""

from __future__ import annotations

import openai
import pytest

from runguard.proxy.store.records import RecordedBody, RequestRecord, TripRecord
from tests.conftest import ProxyFactory, SdkClient
from tests.e2e import agents
from tests.e2e.faults import eventually, requests_of, trips_of
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream

KEY = "sk-records-0123456789abcdefXYZ"
ASKED = "Extract the invoice total."  # the user message chat_agent sends


def _flat(records: object) -> str:
    """Every field of every record, as text (a record's repr shows all its fields)."""
    return repr(records)


async def test_a_stopped_run_is_recorded_without_its_key_or_its_content(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink, sdk_client: SdkClient
) -> None:
    upstream.script = agents.chat_script(steps=20)
    client = sdk_client(await make_proxy(), KEY, {"X-Run-Id": "records-run", "X-Agent-Name": "extractor"})
    with pytest.raises(openai.APIStatusError):
        await agents.chat_agent(client, agents.soft_error_tool, max_steps=20)
    await eventually(lambda: bool(trips_of(sink)) and len(requests_of(sink)) == len(upstream.received) + 1, within=10)

    requests, trips = requests_of(sink), trips_of(sink)
    assert [r.index for r in requests] == list(range(1, len(requests) + 1))
    assert {(r.run_id, r.agent, r.model, r.provider, r.api) for r in requests} == {
        ("records-run", "extractor", "gpt-4o-mini", "openai", "chat")
    }
    forwarded, stopped = requests[:-1], requests[-1]
    assert all(r.status == 200 and r.input_tokens == 50 and r.tool_calls == ("parse_document",) for r in forwarded)
    assert all(r.upstream_ms is not None and r.body is None for r in forwarded)
    (trip,) = [t for t in trips if t.action == "block"]
    assert (stopped.blocked_by, stopped.upstream_ms) == (trip.detector, None)
    assert (trip.run_id, trip.scope, trip.request_index) == ("records-run", "run", stopped.index)
    assert trip.key_hash == stopped.key_hash != KEY

    flat = _flat(sink.records)
    assert KEY not in flat and KEY[3:] not in flat
    assert ASKED not in flat and "partial_parse_error" not in flat and "invoice.pdf" not in flat


async def test_recorded_bodies_hold_the_exchange_but_not_the_key(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink, sdk_client: SdkClient
) -> None:
    upstream.script = agents.chat_script(steps=1)
    client = sdk_client(await make_proxy(store={"record_bodies": True}), KEY, {"X-Run-Id": "bodies-run"})
    assert await agents.chat_agent(client, agents.progressing_tool) == "Done."
    await eventually(lambda: len(requests_of(sink)) == 2, within=10)
    bodies = [r.body for r in requests_of(sink)]
    assert all(isinstance(b, RecordedBody) for b in bodies)
    first = bodies[0]
    assert first is not None
    assert (first.path, first.status) == ("/v1/chat/completions", 200)
    assert ASKED in first.request.decode() and b"parse_document" in first.response
    assert KEY not in _flat(sink.records)


def test_records_default_to_no_usage_no_verdicts_and_no_body() -> None:
    record = RequestRecord("run", "k_0", 1, 0.0, "", "m", "openai", "chat", False, None)
    assert (record.usd, record.input_tokens, record.verdicts, record.body, record.polled) == (0.0, 0, (), None, False)
    trip = TripRecord("run", "k_0", "spiral", "warn", "why", "run", 1, 0.0, 0.0, 0, 0.0)
    assert (dict(trip.evidence), trip.model) == ({}, "")
