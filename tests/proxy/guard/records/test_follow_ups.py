"""What lets a follow-up find its run is written by `remember`, before (and without) the rest of the end:
a Responses follow-up naming the response by `previous_response_id` is found in the response's run."""

from __future__ import annotations

import orjson

from runguard.proxy.core.events import Api
from runguard.proxy.guard.guard import Guard
from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.state.memory import MemoryState
from tests.e2e import payloads
from tests.support.guards import guard_settings, make_guard
from tests.support.proxy import ListSink

KEY = "k_follow"


def _responses() -> Adapter:
    adapter = adapter_for(Api.RESPONSES)
    assert adapter is not None
    return adapter


async def _first_run(guard: Guard, remember: bool) -> str:
    adapter = _responses()
    body = orjson.dumps({"model": "gpt-4o", "input": "look it up"})
    ticket = await guard.admit(
        adapter, adapter.parse_request(body, RequestContext()), body=body, key_hash=KEY, header_run=None
    )
    answer = payloads.response_object(calls=[("call_1", "lookup", '{"q": "x"}')]) | {"id": "resp_follow"}
    seen = guard.response_seen(ticket, adapter.parse_response(orjson.dumps(answer)), 200, 0.01)
    if remember:
        await guard.remember(ticket, seen)  # the end itself has not run
    return ticket.run_id


async def _follow_up_run(guard: Guard) -> str:
    adapter = _responses()
    output = [{"type": "function_call_output", "call_id": "call_1", "output": "found"}]
    body = orjson.dumps({"model": "gpt-4o", "previous_response_id": "resp_follow", "input": output})
    found = await guard.runs.find(None, KEY, adapter.parse_request(body, RequestContext()), 1.0)
    return found.run_id


async def test_a_follow_up_finds_the_run_once_remember_ran_before_the_end() -> None:
    guard = make_guard(guard_settings(), MemoryState(), ListSink())
    first = await _first_run(guard, remember=True)
    assert await _follow_up_run(guard) == first


async def test_without_remember_the_follow_up_is_not_found_in_that_run() -> None:
    guard = make_guard(guard_settings(), MemoryState(), ListSink())
    first = await _first_run(guard, remember=False)
    assert await _follow_up_run(guard) != first  # what `remember` adds is what finds it
