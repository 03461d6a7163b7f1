"""One tenant cannot make the in-memory state forget another tenant's stops or spend.

The attack that once worked, against the real `runguard-proxy serve` with `runs.max_runs: 50`: tenant A's
run is latched and A's key has spent its daily budget; then requests with junk keys (401 upstream) and
requests of a key whose own budget is spent (429 locally, no upstream cost), each naming a new run, fill
the state. Entries were dropped least recently used first, so A's latched run and A's spend were
forgotten and A was let through again. Now an entry that holds a breaker or a key's spend is never
dropped for room (only after its idle time); a tenant at its own bound of runs drops its own oldest
healthy run, or is refused when all of them are stopped. The clients are the openai SDK.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e import payloads
from tests.e2e.trust import serving
from tests.support.upstream import FakeUpstream, Received, Reply

pytestmark = pytest.mark.slow

OWNER = "sk-state-owner-aaaa"
SPENT = "sk-state-spent-bbbb"
CAP_ONE = {"X-RunGuard-Max-Requests": "1"}  # a run's second request stops it, latched until reset
ASK: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def _answers(request: Received) -> Reply:
    """Known keys: $0.021 per answer (60k in, 20k out of gpt-4o-mini); any other key: the provider's 401."""
    if request.headers.get("Authorization") in (f"Bearer {OWNER}", f"Bearer {SPENT}"):
        return Reply.json(payloads.chat_completion("ok", usage=(60_000, 20_000)))
    error = {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}
    return Reply.json({"error": error}, status=401)


def _client(
    url: str, key: str, run: str, headers: dict[str, str] | None = None, http: httpx.AsyncClient | None = None
) -> openai.AsyncOpenAI:
    """The SDK on the proxy; `http`: a connection pool to share (many clients, one setup)."""
    return openai.AsyncOpenAI(
        base_url=url + "/v1",
        api_key=key,
        max_retries=0,
        default_headers={"X-Run-Id": run, **(headers or {})},
        http_client=http,
    )


async def _refused(
    url: str, key: str, run: str, headers: dict[str, str] | None = None, http: httpx.AsyncClient | None = None
) -> str:
    """The RunGuard code a request is refused with (a 429 answered locally); fails if it is let through."""
    with pytest.raises(openai.RateLimitError) as caught:
        await _client(url, key, run, headers, http).chat.completions.create(**ASK)
    return str(caught.value.code)


async def _spend(url: str, key: str, runs: int) -> None:
    for i in range(runs):
        await _client(url, key, f"spend-{i}").chat.completions.create(**ASK)


async def test_junk_keys_and_a_spent_key_s_new_runs_do_not_reopen_another_tenant_s_stops(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = _answers
    budget = {"detectors": {"budget": {"key_daily_usd": 0.05}}}
    async with serving(tmp_path, upstream.url, runs={"max_runs": 50}, guard=budget) as served:
        url = served.url
        # A: one run latched at its cap, and the key's day spent ($0.063 of $0.05).
        await _client(url, OWNER, "a-run", CAP_ONE).chat.completions.create(**ASK)
        assert await _refused(url, OWNER, "a-run", CAP_ONE) == "runguard_max_requests"
        await _spend(url, OWNER, 2)
        assert await _refused(url, OWNER, "a-next") == "runguard_budget"
        # Another key spends its own day, then sends 80 requests, each a new run: all answered locally.
        await _spend(url, SPENT, 3)
        async with httpx.AsyncClient() as pool:
            codes = await asyncio.gather(*(_refused(url, SPENT, f"spent-junk-{i}", http=pool) for i in range(80)))
            assert set(codes) == {"runguard_budget"}
            # 60 junk keys, each a new run: the provider answers 401.
            junk = [
                _client(url, f"sk-junk-{i:04d}", f"junk-{i}", http=pool).chat.completions.create(**ASK)
                for i in range(60)
            ]
            refused = await asyncio.gather(*junk, return_exceptions=True)
        assert all(isinstance(answer, openai.AuthenticationError) for answer in refused)
        forwarded = len(upstream.received)
        # A's latched run and A's spent budget still hold: refused, and the run's breaker still latched.
        assert await _refused(url, OWNER, "a-run", CAP_ONE) == "runguard_budget"  # the key's, named first
        assert await _refused(url, OWNER, "a-later") == "runguard_budget"
        assert await _refused(url, SPENT, "spent-later") == "runguard_budget"
        assert len(upstream.received) == forwarded
        async with httpx.AsyncClient() as http:
            run = (await http.get(url + "/runguard/runs/a-run")).json()
            health = (await http.get(url + "/runguard/health")).json()
            metrics = (await http.get(url + "/runguard/metrics")).text
    assert (run["breaker"]["detector"], run["breaker"]["latched"]) == ("max_requests", True)
    entries = health["entries"]
    assert entries["evicted"] > 100  # the junk made room for itself: healthy entries went, not the stops
    assert entries["entries"] <= 50 + entries["kept"]
    assert f'runguard_state_evictions_total{{reason="room"}} {float(entries["evicted"])}' in metrics


async def test_a_tenant_at_its_bound_drops_its_own_healthy_runs_and_is_refused_when_all_are_stopped(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = _answers
    async with serving(tmp_path, upstream.url, runs={"max_runs_per_tenant": 3}) as served:
        url = served.url
        for i in range(5):  # five healthy runs: the tenant keeps its three last
            await _client(url, OWNER, f"healthy-{i}").chat.completions.create(**ASK)
        for i in range(3):  # three runs stopped: they push out the healthy ones, and stay
            await _client(url, OWNER, f"stopped-{i}", CAP_ONE).chat.completions.create(**ASK)
            assert await _refused(url, OWNER, f"stopped-{i}", CAP_ONE) == "runguard_max_requests"
        assert await _refused(url, OWNER, "one-more") == "runguard_state_full"  # never let through unguarded
        for i in range(3):
            assert await _refused(url, OWNER, f"stopped-{i}", CAP_ONE) == "runguard_max_requests"
        # Another tenant is not touched by this one's bound.
        done = await _client(url, SPENT, "other-tenant").chat.completions.create(**ASK)
        assert done.choices[0].message.content == "ok"
        async with httpx.AsyncClient() as http:
            entries = (await http.get(url + "/runguard/health")).json()["entries"]
    assert (entries["evicted_in_tenant"], entries["refused_runs"]) == (5, 1)
