"""Two real proxy processes sharing one Redis trip exactly as one process would.

Every test starts two `runguard-proxy serve` processes (the replicas) with
state on the machine's Redis under a key prefix of their own, in front of one
fake upstream, and sends a run's requests to both. The outage test runs a
redis-server of its own so it can stop and restart it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
import redis.asyncio as aioredis
import yaml
from agents import Runner

from runguard.proxy.core.ops import Scope
from runguard.proxy.runs import tenants
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state.base import ScopeTtls
from runguard.proxy.state.redis import RedisState
from tests.e2e import agents, payloads, test_background
from tests.e2e.agents import sdk_model
from tests.e2e.teams import analyst_script, run_analyst_team, run_team, team_script
from tests.e2e.test_multi_agent import (
    ask_desk,
    desk,
    desk_script,
    openai_pair,
    openai_ring,
    openai_script,
    ping_pong,
    relay,
    review,
)
from tests.proxy.runs import test_roots
from tests.services import require_redis, unique_name
from tests.support.processes import ServeProcess, start_serve
from tests.support.redis_relay import LosingRelay
from tests.support.redis_server import own_redis
from tests.support.upstream import FakeUpstream, Reply

pytestmark = [pytest.mark.redis, pytest.mark.slow]

Replicas = Callable[..., Awaitable[list[str]]]


def _config(
    path: Path, upstream: str, state_url: str, prefix: str, guard: dict[str, Any] | None, runs: dict[str, Any]
) -> Path:
    settings = {
        "upstreams": {"openai": upstream, "gemini": upstream},
        "runs": {"key_salt": "replica-test-salt", **runs},
        "state": {"url": state_url, "key_prefix": prefix, "timeout": 0.5},
        "store": {"database_url": ""},
        "guard": guard or {},
    }
    path.write_text(yaml.safe_dump(settings))
    return path


@pytest.fixture
def replica_prefix() -> str:
    """The Redis key prefix of this test's replicas (`replicas`)."""
    return unique_name("rgtest")


@pytest.fixture
async def replicas(upstream: FakeUpstream, tmp_path: Path, replica_prefix: str) -> AsyncIterator[Replicas]:
    """make(guard={...}, count=2, state_url=..., runs={...}) -> the replicas' URLs; all stopped and their keys
    deleted after."""
    url = require_redis()
    prefix = replica_prefix
    started: list[ServeProcess] = []

    async def make(
        guard: dict[str, Any] | None = None, count: int = 2, state_url: str = url, runs: dict[str, Any] | None = None
    ) -> list[str]:
        path = tmp_path / f"replicas-{len(started)}.yaml"
        config = _config(path, upstream.url, state_url, prefix, guard, runs or {})
        group = await asyncio.gather(*(start_serve({}, tmp_path, "--config", str(config)) for _ in range(count)))
        started.extend(group)
        return [served.url for served in group]

    yield make
    await asyncio.gather(*(served.stop() for served in started))
    client = aioredis.from_url(url)
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def _client(url: str, run_id: str, key: str = "sk-replica-test", **kwargs: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, default_headers={"X-Run-Id": run_id}, **kwargs)


async def _counters(url: str, run_id: str) -> dict[str, Any]:
    """The run's live counters as the admin API names them (docs/admin-api.md)."""
    async with httpx.AsyncClient() as http:
        counters: dict[str, Any] = (await http.get(f"{url}/runguard/runs/{run_id}")).json()["live"] or {}
    return counters


async def _settled(url: str, run_id: str, within: float = 1.0) -> dict[str, Any]:
    """The run's counters once its request is finished (the response phase runs after the answer)."""
    deadline = time.monotonic() + within
    while True:
        counters = await _counters(url, run_id)
        if counters.get("in_flight") == 0 or time.monotonic() > deadline:
            return counters
        await asyncio.sleep(0.02)


async def _alternating_loop(clients: list[openai.AsyncOpenAI], max_steps: int = 12) -> str:
    """The hand-written agent loop of tests/e2e/agents.py, each step sent to the next replica."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You extract data. Use parse_document."},
        {"role": "user", "content": "Extract the invoice total."},
    ]
    for step in range(max_steps):
        client = clients[step % len(clients)]
        completion = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        message = completion.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = agents.soft_error_tool(call.function.name, orjson.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the agent did not finish within max_steps")


async def test_a_loop_alternating_between_replicas_trips_at_the_same_request(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    upstream.script = agents.chat_script(steps=50)
    urls = await replicas()
    with pytest.raises(openai.RateLimitError) as caught:
        await _alternating_loop([_client(url, "loop-across-replicas") for url in urls])
    assert caught.value.code == "runguard_non_progress"
    assert len(upstream.received) == 3  # as on one process (tests/e2e/test_runaway.py)
    # The run's breaker is shared: the other replica answers the next request locally too.
    for url in urls:
        with pytest.raises(openai.RateLimitError):
            await _client(url, "loop-across-replicas", max_retries=0).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "again"}]
            )
    assert len(upstream.received) == 3


async def test_a_background_response_polled_on_both_replicas_at_once_counts_once_and_trips_the_budget(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    upstream.script = test_background.BackgroundUpstream()
    urls = await replicas(guard={"detectors": {"budget": {"run_usd": test_background.USD * 0.9}}})
    clients = [_client(url, "bg-across-replicas") for url in urls]
    queued = await clients[0].responses.create(model=test_background.MODEL, input="deep research", background=True)
    assert (await clients[1].responses.retrieve(queued.id)).status == "in_progress"
    finished = await asyncio.gather(*(client.responses.retrieve(queued.id) for client in clients * 3))
    assert {response.status for response in finished} == {"completed"}
    deadline = time.monotonic() + 2.0  # the poll is accounted for once its answer is sent
    while "usd" not in (counters := await _counters(urls[1], "bg-across-replicas")):
        assert time.monotonic() < deadline, counters
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)  # time for a second count, were there one
    counters = await _counters(urls[1], "bg-across-replicas")
    assert counters["usd"] == pytest.approx(test_background.USD) and counters["output_tokens"] == 700_000
    with pytest.raises(openai.RateLimitError) as stopped:
        await clients[1].responses.create(model=test_background.MODEL, input="write it up")
    assert stopped.value.code == "runguard_budget"
    for client in clients:
        await client.close()


async def test_in_flight_limit_holds_across_replicas_and_no_count_is_lost(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    upstream.script = lambda _: Reply(200, orjson.dumps(payloads.chat_completion("branch done")), delay=0.6)
    urls = await replicas()
    clients = [_client(url, "fan-out", max_retries=0) for url in urls]
    asks = [
        clients[i % 2].chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"branch {i}"}]
        )
        for i in range(50)
    ]
    results = await asyncio.gather(*asks, return_exceptions=True)
    blocked = [r for r in results if isinstance(r, openai.RateLimitError)]
    assert upstream.max_in_flight <= 20
    assert len(upstream.received) + len(blocked) == 50
    assert len(upstream.received) >= 15  # the limit is 20; the breaker opened once it was passed
    assert {b.code for b in blocked} == {"runguard_over_spawn"}
    counters = await _counters(urls[0], "fan-out")
    assert counters["requests"] == 50  # every increment from both replicas counted


async def test_a_state_reply_lost_on_the_way_counts_once_and_frees_its_slot(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    """The connection to Redis breaks after a request's state step ran: the retry gets that step's reply."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("done"))
    async with LosingRelay(require_redis()) as relay:
        (url,) = await replicas(count=1, state_url=relay.url)
        ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
        await _client(url, "warm-up", max_retries=0).chat.completions.create(**ask)  # script loaded, pool open
        assert (await _settled(url, "warm-up"))["in_flight"] == 0
        relay.armed = True  # the next reply from Redis is the request step of the run below
        done = await _client(url, "lost-reply", max_retries=0).chat.completions.create(**ask)
        assert done.choices[0].message.content == "done"
        assert relay.lost == 1
        counters = await _settled(url, "lost-reply")
    assert counters["requests"] == 1  # counted once, not again by the retry
    assert counters["in_flight"] == 0  # and its slot given back: the request was guarded as usual
    assert len(upstream.received) == 2


async def test_a_state_step_that_timed_out_still_gives_its_slot_back(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    """Redis ran a request's step but its reply never came: the request goes on unguarded (fail open), and once
    the step is known to have run, the in-flight slot it took is given back (else it is held until the run expires)."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("done"))
    async with LosingRelay(require_redis(), hold=True) as relay:
        (url,) = await replicas(count=1, state_url=relay.url)  # state.timeout 0.5 s
        ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
        await _client(url, "warm-up", max_retries=0).chat.completions.create(**ask)
        assert (await _settled(url, "warm-up"))["in_flight"] == 0
        relay.armed = True  # the next reply from Redis, the request step of the run below, is held back
        done = await _client(url, "timed-out", max_retries=0).chat.completions.create(**ask)
        assert done.choices[0].message.content == "done"
        assert relay.lost == 1
        counters = await _settled(url, "timed-out", within=5.0)
    assert counters["requests"] == 1  # the step ran once: the sends after the timeout found it done
    assert counters["in_flight"] == 0
    assert (counters["input_tokens"], counters["output_tokens"]) == (12, 5)  # and what the answer cost was counted


async def test_retry_cascade_opened_by_one_replica_is_honoured_by_the_other_with_one_probe(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    failing = True

    def script(_: Any) -> Reply:
        if failing:
            return Reply.json({"error": {"message": "overloaded"}}, status=503)
        return Reply(200, orjson.dumps(payloads.chat_completion("recovered")), delay=0.3)

    upstream.script = script
    first, second = await replicas(guard={"breaker": {"cooldown_seconds": 1.0}})

    def ask(url: str, i: int) -> Any:
        return _client(url, f"cascade-{i}", max_retries=0).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"question {i}"}]
        )

    for i in range(2):
        with pytest.raises(openai.InternalServerError):
            await ask(first, i)
    with pytest.raises(openai.RateLimitError) as caught:
        await ask(second, 2)  # another replica, another run, the same key and model
    assert caught.value.code == "runguard_retry_cascade"
    assert len(upstream.received) == 2
    failing = False
    await asyncio.sleep(1.2)
    probes = await asyncio.gather(*(ask((first, second)[i % 2], 10 + i) for i in range(6)), return_exceptions=True)
    assert sum(1 for p in probes if not isinstance(p, Exception)) == 1  # one half-open probe in all
    assert len(upstream.received) == 3
    assert (await ask(second, 20)).choices[0].message.content == "recovered"


async def test_per_key_daily_budget_is_the_sum_over_replicas(upstream: FakeUpstream, replicas: Replicas) -> None:
    # gpt-4o-mini: 60k input + 20k output tokens = $0.021 per response.
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok", usage=(60_000, 20_000)))
    urls = await replicas(guard={"detectors": {"budget": {"key_daily_usd": 0.05}}})
    for i in range(3):  # $0.063 spent in all, $0.042 before the third: each replica alone saw at most $0.042
        await _client(urls[i % 2], f"daily-{i}").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"task {i}"}]
        )
    with pytest.raises(openai.RateLimitError) as caught:
        await _client(urls[1], "daily-next", max_retries=0).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "one more"}]
        )
    assert caught.value.code == "runguard_budget"
    assert len(upstream.received) == 3


async def test_redis_outage_fails_open_reports_degraded_and_detection_resumes(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    upstream.script = agents.chat_script(steps=50)
    async with own_redis() as server:
        (url,) = await replicas(count=1, state_url=server.url)
        async with httpx.AsyncClient() as http:
            assert (await http.get(url + "/runguard/health")).json()["status"] == "ok"
            await server.stop()
            healthy = _client(url, "during-outage", max_retries=0)
            for i in range(3):  # requests keep flowing while Redis is down (fail open)
                done = await healthy.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": f"still working {i}"}]
                )
                assert done.choices[0].message.tool_calls
            assert (await http.get(url + "/runguard/health")).json()["status"] == "degraded"
            await server.start()  # back on its port, and empty: state was lost with it
            with pytest.raises(openai.RateLimitError) as caught:
                await _alternating_loop([_client(url, "after-outage")])
            assert caught.value.code == "runguard_non_progress"
            assert (await http.get(url + "/runguard/health")).json()["status"] == "ok"


# -- openai-agents handoffs across replicas ---------------------------------------------------------


class RoundRobin(httpx.AsyncBaseTransport):
    """Sends each request to the next replica in turn, `start` first: a load balancer without affinity."""

    def __init__(self, urls: list[str], start: int = 0) -> None:
        self._urls = [httpx.URL(url) for url in urls]
        self._sent = start
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        replica = self._urls[self._sent % len(self._urls)]
        self._sent += 1
        request.url = request.url.copy_with(host=replica.host, port=replica.port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _spread(urls: list[str], run_id: str, start: int) -> openai.AsyncOpenAI:
    """A client of a run whose requests go to each replica in turn."""
    return openai.AsyncOpenAI(
        base_url=urls[0] + "/v1",
        api_key="sk-replica-agents",
        default_headers={"X-Run-Id": run_id},
        http_client=httpx.AsyncClient(transport=RoundRobin(urls, start)),
        max_retries=0,
    )


@pytest.mark.parametrize("start", [0, 1])
@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_an_openai_agents_routing_session_spread_over_replicas_is_not_stopped(
    upstream: FakeUpstream, replicas: Replicas, kind: str, start: int
) -> None:
    """Triage is named once billing hands a question back to it; each new question starts at triage again,
    often on the replica that did not see that handoff. The name is the run's, not a replica's: triage's
    later requests are triage's, and a question handed back is not triage re-entering the chain."""
    upstream.script = desk_script(upstream, kind)
    urls = await replicas()
    triage = desk(sdk_model(kind, _spread(urls, f"desk-{kind}-{start}", start)))
    await ask_desk(triage, ["support", "billing", "support", "billing"])
    assert len(upstream.received) == 14


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_openai_agents_handoff_loops_trip_across_replicas_where_they_trip_on_one(
    upstream: FakeUpstream, replicas: Replicas, kind: str
) -> None:
    urls = await replicas()
    upstream.script = openai_script(upstream, kind, ping_pong)
    triage = openai_pair(_spread(urls, f"pp-{kind}", 0), kind, "triage", "billing")
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(triage, "My invoice is wrong.", max_turns=30)
    assert caught.value.code == "runguard_handoff_cycle"
    assert len(upstream.received) == 4  # as on one process (tests/e2e/test_multi_agent.py)

    upstream.received.clear()
    upstream.script = openai_script(upstream, kind, review(rounds=4))
    writer = openai_pair(_spread(urls, f"review-{kind}", 1), kind, "writer", "editor")
    assert (await Runner.run(writer, "Write a poem about a harbour.", max_turns=30)).final_output == "Approved."

    upstream.received.clear()
    upstream.script = openai_script(upstream, kind, relay(["triage", "billing", "refunds"], back_to="triage"))
    model = sdk_model(kind, _spread(urls, f"reenter-{kind}", 1))
    with pytest.raises(openai.RateLimitError) as caught:
        await Runner.run(openai_ring(model, ["triage", "billing", "refunds"]), "My refund never arrived.", max_turns=30)
    assert caught.value.code == "runguard_delegation"
    assert "'triage' is handed work while already in the delegation chain triage -> billing" in caught.value.message
    assert len(upstream.received) == 4


async def test_a_member_thread_on_another_replica_is_nested_under_the_leader_s_run(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    """No `X-Run-Id`: the leader's requests go to one replica, its member's to the other; the member's
    requests find the run its delegation was remembered under in the shared state, and count there."""
    upstream.script = team_script
    leader_url, member_url = await replicas(guard={"detectors": {"max_requests": {"limit": 3}}})
    leader = openai.AsyncOpenAI(base_url=leader_url + "/v1", api_key="sk-replica-team", max_retries=0)
    member = openai.AsyncOpenAI(base_url=member_url + "/v1", api_key="sk-replica-team", max_retries=0)
    with pytest.raises(openai.RateLimitError) as caught:
        await run_team(leader, member_client=member)
    await leader.close()
    await member.close()
    assert caught.value.code == "runguard_max_requests"
    assert len(upstream.received) == 3  # the leader's last request was its run's 4th


async def test_with_the_header_a_member_on_another_replica_is_judged_in_its_thread(
    upstream: FakeUpstream, replicas: Replicas, replica_prefix: str
) -> None:
    """`X-Run-Id` on every agent; the leader's requests go to one replica, its member's to the other, which
    relayed no delegation: it learns from the run's state that the member's conversation is a thread of the
    run. The run counts all four requests; its own conversation's measures hold the leader's two."""
    upstream.script = team_script
    leader_url, member_url = await replicas()
    leader, member = (_client(url, "team-across", max_retries=0) for url in (leader_url, member_url))
    await run_team(leader, member_client=member)
    await leader.close()
    await member.close()
    counters = await _settled(leader_url, "team-across")
    assert counters["requests"] == 4
    state = RedisState.from_url(require_redis(), key_prefix=replica_prefix, ttls=ScopeTtls(), timeout=2.0)
    run_state = tenants.state_id(KeyHasher(b"replica-test-salt").hash("sk-replica-test"), "team-across")
    first = (await state.read_scope(Scope.RUN, run_state))["context_growth.first"]  # the detector's own state
    await state.close()
    assert isinstance(first, tuple) and len(first) == 2  # the member's two went to its thread


@pytest.mark.parametrize("run", [None, "team-on-replicas"])
async def test_member_threads_spread_over_replicas_are_judged_each_on_its_own(
    upstream: FakeUpstream, replicas: Replicas, run: str | None
) -> None:
    """Round-robin, without `X-Run-Id` and with it on every agent: the analyst's six threads each begin with
    the same lookup. Their state lives in thread scopes of the shared state, so no replica sees one agent
    repeating itself (with the header, a replica learns a thread from the run's state when the leader's
    delegation went through the other one); a thread that does loop is still stopped, whichever replica
    its requests reach."""
    urls = await replicas()
    upstream.script = analyst_script(("list_tables", "{}"))
    client = openai.AsyncOpenAI(
        base_url=urls[0] + "/v1",
        api_key="sk-replica-team",
        http_client=httpx.AsyncClient(transport=RoundRobin(urls)),
        default_headers={"X-Run-Id": run} if run else None,
        max_retries=0,
    )
    assert await run_analyst_team(client, '{"tables": ["sales", "costs"]}') == "All answered."
    upstream.script = analyst_script(("run_sql", json.dumps({"sql": "select 1 from sales"})), rounds=99)
    other = client.with_options(api_key="sk-replica-team-2", default_headers={"X-Run-Id": f"{run}-2"} if run else {})
    with pytest.raises(openai.RateLimitError) as caught:  # another key: another run
        await run_analyst_team(other, '{"error": "relation is locked"}')
    await client.close()
    assert caught.value.code == "runguard_non_progress"


async def test_a_scheduled_agent_s_invocations_spread_over_replicas_are_a_run_each(
    upstream: FakeUpstream, replicas: Replicas
) -> None:
    """No `X-Run-Id`: a new root's concurrent first requests, sent to both replicas, agree on one run in the
    shared state; its next invocation after the idle time is a new run, whichever replica it reaches."""
    urls = await replicas(runs={"inferred_idle_seconds": test_roots.IDLE})
    upstream.script = test_roots.agent_step
    clients = [openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-scheduled", max_retries=0) for url in urls]

    async def run_of(client: openai.AsyncOpenAI, messages: list[Any]) -> str:
        raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)
        return raw.headers["x-runguard-run-id"]

    first = await asyncio.gather(*(run_of(clients[i % 2], test_roots.PROMPT) for i in range(3)))
    await asyncio.sleep(test_roots.IDLE * 2)
    await test_roots.invoke(clients[1])
    after = await run_of(clients[0], test_roots.PROMPT)  # no pause: the same run as the invocation's
    for client in clients:
        await client.close()
    assert len(set(first)) == 1
    assert after != first[0]
    assert [r.json()["messages"][0]["role"] for r in upstream.received] == ["system"] * 6
