"""Every trip records the evidence that formed its pattern: digests by default, text in the record mode."""

from __future__ import annotations

import json

import openai
import pytest

from runguard.proxy.store.records import TripRecord
from tests.conftest import ProxyFactory
from tests.e2e import agents
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream


def _stop_of(sink: ListSink) -> TripRecord:
    return next(r for r in sink.records if isinstance(r, TripRecord) and r.action == "block")


@pytest.mark.parametrize("record_bodies", [False, True], ids=["default", "record-bodies"])
async def test_a_loop_s_trip_shows_the_calls_that_repeated(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink, record_bodies: bool
) -> None:
    upstream.script = agents.chat_script(steps=50)
    proxy = await make_proxy(store={"record_bodies": record_bodies})
    client = openai.AsyncOpenAI(
        base_url=proxy + "/v1", api_key="sk-test-evidence", default_headers={"X-Run-Id": "evidence"}, max_retries=0
    )
    with pytest.raises(openai.RateLimitError):
        await agents.chat_agent(client, agents.soft_error_tool)
    stop = _stop_of(sink)
    assert stop.detector == "non_progress" and stop.evidence["summary"] == stop.reason
    calls = stop.evidence["calls"]
    assert [c["tool"] for c in calls] == ["parse_document"] * 3
    assert len({c["result_digest"] for c in calls}) == 1 and calls[-1]["request_seq"] == 4
    text = json.dumps(stop.evidence)
    if record_bodies:  # the tripping request's call and result, abridged
        assert json.loads(calls[-1]["args"])["attempt"] == 2 and "partial_parse_error" in calls[-1]["result"]
        assert "args" not in calls[0]  # earlier ones are known by digest only
    else:
        assert "partial_parse_error" not in text and "invoice.pdf" not in text  # no content by default
