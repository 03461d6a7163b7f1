"""A run belongs to its tenant: another key can never read, tighten, trip or reset it.

Each test is an attack that once worked, where run ids were global: a second key sending the first key's
`X-Run-Id` with a tightening header tripped the first key's run; a `previous_response_id` from another key
joined (and could trip) that key's run; a poll of another key's background response counted its cost in
that key's run. And what must still hold: keys grouped into one tenant (`runs.tenants`) share their runs,
so an agent calling OpenAI and Gemini with two keys is one run with one budget; the admin API tells
same-named runs of two tenants apart. The clients are the real SDKs.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import redis.asyncio as aioredis
import yaml
from google import genai
from google.genai import types

from runguard.proxy.runs.keys import KeyHasher
from tests.conftest import ProxyFactory
from tests.e2e import payloads
from tests.e2e.faults import eventually, requests_of
from tests.services import require_redis, unique_name
from tests.support.processes import start_serve
from tests.support.proxy import ListSink
from tests.support.upstream import FakeUpstream, Received, Reply

OWNER = "sk-tenant-owner-1111"
INTRUDER = "sk-tenant-intruder-2222"
GEMINI_KEY = "AIza-tenant-owner-3333"
HASH = KeyHasher(b"test-salt").hash
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def _script(request: Received) -> Reply:
    if request.path.endswith(":generateContent"):
        return Reply.json(payloads.gemini_response("hi"))
    return Reply.json(payloads.chat_completion("ok"))


def _openai(url: str, key: str, **headers: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, default_headers=headers, max_retries=0)


async def _tighten_and_trip(url: str) -> None:
    """The intruder names the owner's run and tightens it to one request: its second request trips the run
    it is in."""
    intruder = _openai(url, INTRUDER, **{"X-Run-Id": "shared-run", "X-RunGuard-Max-Requests": "1"})
    await intruder.chat.completions.create(**CHAT)
    with pytest.raises(openai.RateLimitError):
        await intruder.chat.completions.create(**CHAT)


async def test_another_key_naming_a_run_cannot_tighten_or_trip_it(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    upstream.script = _script
    url = await make_proxy()
    owner = _openai(url, OWNER, **{"X-Run-Id": "shared-run"})
    await owner.chat.completions.create(**CHAT)
    await _tighten_and_trip(url)
    answer = await owner.chat.completions.create(**CHAT)  # the owner's run was never the intruder's
    assert answer.choices[0].message.content == "ok"
    await eventually(lambda: len(requests_of(sink)) == 4)
    records = requests_of(sink)
    assert {r.run_id for r in records} == {"shared-run"}  # the id each sent, as sent
    assert [(r.key_hash == HASH(OWNER), r.index, r.blocked_by) for r in records] == [
        (True, 1, None),
        (False, 1, None),
        (False, 2, "max_requests"),
        (True, 2, None),
    ]


async def test_a_previous_response_id_of_another_key_does_not_join_its_run(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    ids = itertools.count(1)
    upstream.script = lambda _: Reply.json(payloads.response_object("done") | {"id": f"resp_{next(ids)}"})
    url = await make_proxy()
    owner = _openai(url, OWNER)
    first = await owner.responses.create(model="gpt-4o", input="Plan the quarterly report")
    intruder = _openai(url, INTRUDER, **{"X-RunGuard-Max-Requests": "1"})
    await intruder.responses.create(model="gpt-4o", previous_response_id=first.id, input="and then?")
    with pytest.raises(openai.RateLimitError):  # the intruder trips its own run, nobody else's
        await intruder.responses.create(model="gpt-4o", previous_response_id=first.id, input="and then?")
    follow = await owner.responses.create(model="gpt-4o", previous_response_id=first.id, input="go on")
    assert follow.output_text == "done"
    await eventually(lambda: len(requests_of(sink)) == 4)
    owners = [r for r in requests_of(sink) if r.key_hash == HASH(OWNER)]
    intruders = [r for r in requests_of(sink) if r.key_hash == HASH(INTRUDER)]
    assert len({r.run_id for r in owners}) == 1 and [r.index for r in owners] == [1, 2]
    assert not {r.run_id for r in intruders} & {r.run_id for r in owners}


async def test_a_poll_of_another_key_s_background_response_is_not_counted_in_its_run(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    queued = payloads.response_object("") | {"id": "resp_bg", "status": "queued", "usage": None, "output": []}
    done = payloads.response_object("report") | {"id": "resp_bg"}
    upstream.script = lambda received: Reply.json(queued if received.method == "POST" else done)
    url = await make_proxy()
    owner = _openai(url, OWNER, **{"X-Run-Id": "bg-run"})
    started = await owner.responses.create(model="gpt-4o", input="write the report", background=True)
    intruder = _openai(url, INTRUDER)
    assert (await intruder.responses.retrieve(started.id)).output_text == "report"
    await eventually(lambda: len(requests_of(sink)) == 1)
    assert [r.polled for r in requests_of(sink)] == [False]  # the intruder's poll counted nothing
    assert (await owner.responses.retrieve(started.id)).output_text == "report"
    await eventually(lambda: len(requests_of(sink)) == 2)
    assert [(r.polled, r.run_id, r.output_tokens) for r in requests_of(sink)][1] == (True, "bg-run", 6)


async def test_keys_grouped_into_one_tenant_share_a_run_across_providers(
    upstream: FakeUpstream, make_proxy: ProxyFactory, sink: ListSink
) -> None:
    """One agent, OpenAI and Gemini, two keys of one tenant: one run, one request cap of 3."""
    upstream.script = _script
    url = await make_proxy(runs={"tenants": {"research": [HASH(OWNER), HASH(GEMINI_KEY)]}})
    headers = {"X-Run-Id": "research-run", "X-RunGuard-Max-Requests": "3"}
    chat = _openai(url, OWNER, **headers)
    gemini = genai.Client(api_key=GEMINI_KEY, http_options=types.HttpOptions(base_url=url, headers=headers))
    await chat.chat.completions.create(**CHAT)
    await gemini.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    await chat.chat.completions.create(**CHAT)
    with pytest.raises(genai.errors.ClientError) as stopped:
        await gemini.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert stopped.value.code == 429
    await _tighten_and_trip(url)  # a key outside the tenant: a run of its own with the same id
    await eventually(lambda: len(requests_of(sink)) == 6)
    grouped = [r for r in requests_of(sink) if r.key_hash != HASH(INTRUDER)]
    assert [(r.provider, r.index) for r in grouped] == [("openai", 1), ("gemini", 2), ("openai", 3), ("gemini", 4)]


async def _admin(http: httpx.AsyncClient, method: str, path: str, **params: str) -> tuple[int, Any]:
    response = await http.request(method, path, params=params, headers={"Content-Type": "application/json"})
    return response.status_code, response.json()


async def test_the_admin_api_tells_two_tenants_runs_of_one_id_apart(
    upstream: FakeUpstream, make_proxy: ProxyFactory
) -> None:
    upstream.script = _script
    url = await make_proxy()
    owner = _openai(url, OWNER, **{"X-Run-Id": "shared-run", "X-RunGuard-Max-Requests": "1"})
    await owner.chat.completions.create(**CHAT)
    with pytest.raises(openai.RateLimitError):
        await owner.chat.completions.create(**CHAT)  # the owner's run is stopped
    intruder = _openai(url, INTRUDER, **{"X-Run-Id": "shared-run"})
    await intruder.chat.completions.create(**CHAT)
    async with httpx.AsyncClient(base_url=url) as http:
        status, body = await _admin(http, "GET", "/runguard/runs/shared-run")
        assert status == 409 and body["tenants"] == sorted([HASH(OWNER), HASH(INTRUDER)])
        assert (await _admin(http, "POST", "/runguard/runs/shared-run/reset"))[0] == 409
        status, mine = await _admin(http, "GET", "/runguard/runs/shared-run", tenant=HASH(OWNER))
        assert (status, mine["tenant"], mine["breaker"]["state"]) == (200, HASH(OWNER), "open")
        status, theirs = await _admin(http, "GET", "/runguard/runs/shared-run", tenant=HASH(INTRUDER))
        assert (status, theirs["breaker"]["state"], theirs["live"]["requests"]) == (200, "closed", 1)
        status, reset = await _admin(http, "POST", "/runguard/runs/shared-run/reset", tenant=HASH(OWNER))
        assert (status, reset["cleared"]) == (200, True)
        status, theirs = await _admin(http, "GET", "/runguard/runs/shared-run", tenant=HASH(INTRUDER))
        assert theirs["live"]["requests"] == 1  # the other tenant's run is untouched
    assert (await owner.chat.completions.create(**CHAT)).choices[0].message.content == "ok"


@pytest.mark.redis
async def test_the_served_proxy_with_redis_keeps_tenants_runs_apart(upstream: FakeUpstream, tmp_path: Path) -> None:
    """Attack 1 against two `runguard-proxy serve` replicas sharing Redis state: the owner's requests land
    on one replica, the intruder's on the other."""
    upstream.script = _script
    prefix = unique_name("rgtenant")
    config = tmp_path / "runguard.yaml"
    settings = {
        "upstreams": {"openai": upstream.url, "gemini": upstream.url},
        "runs": {"key_salt": "test-salt"},
        "state": {"url": require_redis(), "key_prefix": prefix},
        "store": {"database_url": ""},
    }
    config.write_text(yaml.safe_dump(settings))
    first, second = [await start_serve({}, tmp_path, "--config", str(config)) for _ in range(2)]
    try:
        owner = _openai(first.url, OWNER, **{"X-Run-Id": "shared-run"})
        await owner.chat.completions.create(**CHAT)
        await _tighten_and_trip(second.url)
        assert (await owner.chat.completions.create(**CHAT)).choices[0].message.content == "ok"
        async with httpx.AsyncClient(base_url=second.url) as http:
            status, body = await _admin(http, "GET", "/runguard/runs/shared-run")
        assert status == 409 and body["tenants"] == sorted([HASH(OWNER), HASH(INTRUDER)])
    finally:
        await first.stop()
        await second.stop()
        client = aioredis.from_url(require_redis())
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()
