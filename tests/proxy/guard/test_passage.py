"""A request's passage through the guard: ended exactly once, recorded when its client leaves, its slot given back
when nothing went upstream, answered locally when a breaker is open.

A real `Guard` (the default detectors, the in-memory state, a list of records)
driven as the handlers drive it, with a Chat request parsed by the real adapter.
Each case runs with a state that never waits (the end runs in place) and with
one that does (the end runs in a task of its own, as with Redis).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from runguard.proxy.core.events import Api, ResponseInfo, Usage
from runguard.proxy.guard.guard import Guard
from runguard.proxy.guard.passage import CLIENT_LEFT, Passage
from runguard.proxy.providers.base import Adapter, RequestContext
from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import RecordedBody, RequestRecord
from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.support.guards import guard_settings, make_guard
from tests.support.proxy import ListSink

RUN = "passage-run"
ASK = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "find the invoice"}]})


class WaitingState(MemoryState):
    """The in-memory state, said to wait as a networked one does: ends run in tasks of their own."""

    never_waits = False


@pytest.fixture(params=["in-place", "in-a-task"])
def state(request: pytest.FixtureRequest) -> MemoryState:
    return MemoryState() if request.param == "in-place" else WaitingState()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


def _guard(state: MemoryState, sink: ListSink, limit: int = 100) -> Guard:
    return make_guard(guard_settings(guard={"detectors": {"max_requests": {"limit": limit}}}), state, sink)


@pytest.fixture
def guard(state: MemoryState, sink: ListSink) -> Guard:
    return _guard(state, sink)


def _chat() -> Adapter:
    adapter = adapter_for(Api.CHAT)
    assert adapter is not None
    return adapter


def passage(guard: Guard, stream: bool = False) -> Passage:
    adapter = _chat()
    body = orjson.dumps({**orjson.loads(ASK), "stream": stream})
    info = adapter.parse_request(body, RequestContext())
    return guard.passage(adapter, info, body=body, key_hash="k_test", header_run=RUN)


def records(sink: ListSink) -> list[RequestRecord]:
    return [r for r in sink.records if isinstance(r, RequestRecord)]


async def in_flight(guard: Guard) -> int:
    """The run's requests in flight, as the next request's admission counts them (itself included)."""
    async with passage(guard) as probe:
        count = probe.ticket.facts.in_flight if probe.ticket.facts else -1
        probe.client_status = 200
    return count


def _completion() -> ResponseInfo:
    return _chat().parse_response(orjson.dumps(payloads.chat_completion("The invoice is #42.", usage=(30, 7))))


async def test_a_passage_is_ended_once_whatever_ends_it_after(guard: Guard, sink: ListSink) -> None:
    async with passage(guard) as p:
        assert p.answer is None
        p.forwarding()
        seen = p.seen(_completion(), 200)
        assert p.replacement() is None
        p.client_status = 200
    assert p.ended
    await p.finish()
    p.leave()
    await eventually(lambda: len(records(sink)) >= 1)
    await guard.settle(5.0)  # every end still running is done: a second end would be recorded by now
    (record,) = records(sink)
    assert (record.run_id, record.status, record.error) == (RUN, 200, None)
    assert (record.input_tokens, record.output_tokens) == (30, 7)
    assert seen.usd > 0 and record.usd == pytest.approx(seen.usd)
    assert await in_flight(guard) == 1  # its slot was given back by its end


async def test_a_client_that_leaves_mid_stream_leaves_a_record_of_what_it_was_sent(
    guard: Guard, sink: ListSink
) -> None:
    chunks = payloads.chat_stream("The invoice is number forty-two.", with_usage=False)

    async def relay_half() -> None:
        async with passage(guard, stream=True) as p:
            parser = p.ticket.adapter.stream_parser()
            p.reading(parser, 200)
            p.client_status = 200
            p.body = RecordedBody("/v1/chat/completions", "", ASK, b"", 200)
            for chunk in chunks[: len(chunks) // 2]:
                parser.feed(chunk)
            raise asyncio.CancelledError  # the server cancels the handler: its client went away

    with pytest.raises(asyncio.CancelledError):
        await relay_half()
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert record.error == CLIENT_LEFT and record.status == 200 and record.streamed
    assert record.output_tokens > 0 and record.usage_estimated  # what passed, estimated: no usage came
    assert record.body is not None and record.body.request == ASK
    assert await in_flight(guard) == 1


async def test_a_client_that_leaves_before_anything_went_upstream_gives_its_slot_back(
    guard: Guard, sink: ListSink
) -> None:
    async def wait_then_lose_the_client() -> None:
        async with passage(guard):
            assert await in_flight(guard) == 2  # this one holds a slot while it waits
            raise ConnectionResetError

    with pytest.raises(ConnectionResetError):
        await wait_then_lose_the_client()
    await eventually(lambda: len(records(sink)) == 2)
    left = next(r for r in records(sink) if r.error == CLIENT_LEFT)
    assert left.status is None and left.upstream_ms is None
    assert await in_flight(guard) == 1


async def test_a_handler_that_fails_still_ends_its_passage_with_the_failure_named(guard: Guard, sink: ListSink) -> None:
    with pytest.raises(ValueError, match="bug"):
        async with passage(guard):
            raise ValueError("bug")
    await eventually(lambda: len(records(sink)) == 1)
    assert records(sink)[0].error == "ValueError"
    assert await in_flight(guard) == 1


async def test_a_run_past_its_cap_is_answered_locally_and_then_by_its_open_breaker(
    state: MemoryState, sink: ListSink
) -> None:
    guard = _guard(state, sink, limit=1)
    async with passage(guard) as first:
        first.seen(_completion(), 200)
        first.client_status = 200
    answers: list[Any] = []
    for _ in range(2):
        async with passage(guard) as stopped:
            assert stopped.answer is not None
            answers.append(stopped.answer)
            stopped.body = RecordedBody("/v1/chat/completions", "", ASK, b"", None)
    assert [a.status for a in answers] == [429, 429]
    assert b"max_requests" in answers[0].body
    assert b"stays stopped until reset" in answers[1].body  # the run's breaker, latched by the cap, answers
    await eventually(lambda: len(records(sink)) == 3)
    blocked = records(sink)[1:]
    assert [r.blocked_by for r in blocked] == ["max_requests", "max_requests"]
    assert [r.status for r in blocked] == [429, 429] and all(r.upstream_ms is None for r in blocked)
    assert all(r.body is not None for r in blocked)


async def test_a_passage_read_from_a_stream_accounts_for_what_the_parser_read(guard: Guard, sink: ListSink) -> None:
    async with passage(guard, stream=True) as p:
        parser = p.ticket.adapter.stream_parser()
        p.reading(parser, 200)
        for chunk in payloads.chat_stream("Done.", with_usage=True):
            parser.feed(chunk)
        p.client_status = 200
    await eventually(lambda: len(records(sink)) == 1)
    (record,) = records(sink)
    assert record.error is None and not record.usage_estimated and record.output_tokens > 0


async def test_a_socket_s_passage_is_entered_and_finished_by_its_relay(guard: Guard, sink: ListSink) -> None:
    p = passage(guard)
    with pytest.raises(RuntimeError):
        _ = p.ticket  # not admitted yet
    await p.enter()
    p.seen(ResponseInfo(usage=Usage(5, 2)), 200)
    p.client_status = 200
    await p.finish()
    await p.finish()
    await eventually(lambda: len(records(sink)) == 1)
    await guard.settle(5.0)  # every end still running is done
    assert len(records(sink)) == 1
