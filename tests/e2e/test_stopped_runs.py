"""A run stopped for a loop stays stopped, whatever its client retries, until it is reset.

Some frameworks retry every 429 on their own schedule, ignoring `x-should-retry: false`. The
breaker's cooldown is short here (0.2 s) and the clients retry after it has passed: google-genai
with its own retry options, and a hand-written retry loop around the openai SDK (what such a
framework does). Nothing of the stopped run may reach the upstream again until the admin reset.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from runguard.proxy.state.base import StateBackend
from tests.conftest import ProxyFactory
from tests.e2e import agents, payloads
from tests.proxy.state.support import delete_prefix, redis_state
from tests.services import require_redis, unique_name
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

COOLDOWN = {"breaker": {"cooldown_seconds": 0.2, "max_cooldown_seconds": 0.2}}


async def _reset(url: str, run_id: str) -> None:
    # The admin API takes changes as JSON only (docs/security.md, "Admin API").
    async with aiohttp.ClientSession() as http, http.post(f"{url}/runguard/runs/{run_id}/reset", json={}) as reply:
        assert reply.status == 200


async def _retrying(create: Any, attempts: int = 3, backoff: float = 0.3) -> Any:
    """What a framework that retries any 429 does: wait longer than the cooldown, send the same again."""
    for _ in range(attempts - 1):
        try:
            return await create()
        except openai.RateLimitError:
            await asyncio.sleep(backoff)
    return await create()


WORDS = ("please", "today", "quickly", "again", "really", "now", "anyway", "honestly", "still", "maybe", "ok", "so")


def _query(turn: int) -> str:
    """A rephrasing of one search each turn: `spiral` trips after the 3rd response, and the breaker opens for
    the run's next request (which a retry is not judged again for: only the breaker holds it)."""
    return f"cheapest flight from lisbon to berlin in may {WORDS[turn % len(WORDS)]}"


def spiral_script(received: Received) -> Reply:
    body = received.json()
    if "contents" in body:
        turn = sum(1 for c in body["contents"] for p in c["parts"] if "functionResponse" in p)
        return Reply.json(payloads.gemini_response(calls=[("search", {"query": _query(turn)})]))
    turn = sum(1 for m in body["messages"] if m["role"] == "tool")
    call = (f"call_{turn}", "search", json.dumps({"query": _query(turn)}))
    return Reply.json(payloads.chat_completion(tool_calls=[call]))


async def _loop_until_stopped(client: openai.AsyncOpenAI) -> tuple[list[dict[str, Any]], str | None]:
    """The agent loop until the proxy stops it: the messages it had then (each search found something new), and
    the stop's error code."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the cheapest flight Lisbon-Berlin in May."}]
    for turn in range(12):
        try:
            completion = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        except openai.RateLimitError as stopped:
            return messages, stopped.code
        message = completion.choices[0].message
        assert message.tool_calls
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"fares page {turn}: EUR {90 + turn}"})
    raise AssertionError("not stopped")


async def _stays_stopped_then_reset(proxy: str, upstream: FakeUpstream, run_id: str) -> None:
    upstream.script = spiral_script
    client = openai.AsyncOpenAI(
        base_url=proxy + "/v1", api_key="sk-test-stopped", default_headers={"X-Run-Id": run_id}, max_retries=0
    )
    messages, code = await _loop_until_stopped(client)
    assert code == "runguard_spiral" and len(upstream.received) == 3

    def again() -> Any:
        return client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]

    with pytest.raises(openai.RateLimitError) as caught:
        await _retrying(again)  # three sends, each after the cooldown had passed
    assert caught.value.code == "runguard_spiral"
    assert "stays stopped until reset" in caught.value.message
    assert len(upstream.received) == 3  # no probe went out: the loop did not go on
    await _reset(proxy, run_id)
    await again()  # reopened: the run's next step goes upstream
    assert len(upstream.received) == 4
    await client.close()


async def test_a_client_retrying_429s_after_the_cooldown_never_gets_a_stopped_run_going_again(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    await _stays_stopped_then_reset(await make_proxy(guard=COOLDOWN), upstream, "stopped-retrying")


@pytest.fixture
async def redis_backend() -> AsyncIterator[StateBackend]:
    url, prefix = require_redis(), unique_name("rgstopped")
    state = redis_state(url, prefix)
    yield state
    await state.close()
    await delete_prefix(url, prefix)


@pytest.mark.redis
async def test_a_stopped_run_stays_stopped_with_its_state_in_redis(
    upstream: FakeUpstream, sink: ListSink, redis_backend: StateBackend
) -> None:
    running = await start_proxy(settings_for(upstream.url, guard=COOLDOWN), sink=sink, state=redis_backend)
    try:
        await _stays_stopped_then_reset(running.url, upstream, "stopped-redis")
    finally:
        await running.stop()


async def test_google_genai_retrying_on_its_own_gets_the_stop_every_time(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = spiral_script
    proxy = await make_proxy(guard=COOLDOWN)
    # google-genai retries 429 itself when asked to; its first retry comes after the cooldown has passed.
    retry = types.HttpRetryOptions(attempts=4, initial_delay=0.3, max_delay=0.3, jitter=0, http_status_codes=[429])
    options = types.HttpOptions(base_url=proxy, headers={"X-Run-Id": "stopped-genai"}, retry_options=retry)
    client = genai.Client(api_key="test-key", http_options=options)
    with pytest.raises(genai_errors.ClientError) as caught:
        await agents.gemini_agent(client, lambda _, args: f"fares found for {args['query']}")
    assert caught.value.code == 429 and "spiral" in (caught.value.message or "")
    assert len(upstream.received) == 3  # its retries after the cooldown were answered locally too
    other = genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=proxy, headers={"X-Run-Id": "x"}))
    await other.aio.models.generate_content(model="gemini-2.5-flash", contents="Another task.")
    assert len(upstream.received) == 4  # the key's other runs are not held
