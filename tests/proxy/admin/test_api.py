"""The admin API on the real proxy: access rules, run detail, resets that reopen a run or key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import aiohttp
import httpx
import openai
import pytest
from pydantic import SecretStr

from runguard.config.settings import ServerSettings
from runguard.detectors.max_requests import MaxRequests
from runguard.proxy.admin.api import RESET_LOG, STORE_READER, admin_denial, is_loopback
from runguard.proxy.core.ops import Put, Scope
from runguard.proxy.guard.breaker import BreakerRecord, BreakerState
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.serve.app import create_app
from runguard.proxy.serve.server import Running, start
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

KEY = "sk-test-abc"
TOKEN = "admin-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def call(url: str, method: str, path: str, headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
    """An admin request as the CLI sends it: a POST carries a JSON body (`{}`), as the admin API requires."""
    body = {} if method == "POST" else None
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url + path, headers=headers, json=body) as response,
    ):
        body = await response.json() if response.content_type == "application/json" else await response.text()
        return response.status, body


@pytest.fixture
async def blocking(upstream: FakeUpstream) -> AsyncIterator[tuple[str, ListSink, MemoryState]]:
    """A proxy whose runs are stopped after 2 requests; its sink and in-memory state exposed."""
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    sink, state = ListSink(), MemoryState()
    settings = settings_for(upstream.url, guard={"detectors": {"max_requests": {"limit": 2}}})
    running = await start_proxy(settings, sink=sink, state=state, detectors=[MaxRequests()])
    yield running.url, sink, state
    await running.stop()


async def ask(sdk: openai.AsyncOpenAI) -> None:
    await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "step"}])


def sdk_for(url: str, run_id: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, default_headers={"X-Run-Id": run_id})


def test_admin_denial_rules() -> None:
    local, exposed = ServerSettings(), ServerSettings(host="0.0.0.0")
    with_token = ServerSettings(host="0.0.0.0", admin_token=SecretStr(TOKEN))
    assert admin_denial(local, None) is None
    denied = admin_denial(exposed, None)
    assert denied is not None and denied.status == 403
    assert admin_denial(exposed, None, admin=False) is None  # metrics: content-free, readable by scrapers
    for wrong in (None, "", "Bearer nope", f"Basic {TOKEN}", TOKEN):
        refused = admin_denial(with_token, wrong)
        assert refused is not None and refused.status == 401
        assert admin_denial(with_token, wrong, admin=False) is not None
    assert admin_denial(with_token, f"Bearer {TOKEN}") is None
    assert admin_denial(with_token, f"bearer {TOKEN}", admin=False) is None
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.0.0.5", "proxy.internal")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]


async def test_token_protects_admin_and_metrics_but_not_health(upstream: FakeUpstream) -> None:
    settings = settings_for(upstream.url, server={"admin_token": TOKEN})
    running = await start_proxy(settings, detectors=[])
    try:
        for method, path in (
            ("GET", "/runguard/runs"),
            ("GET", "/runguard/metrics"),
            ("POST", "/runguard/runs/r/reset"),
        ):
            status, _ = await call(running.url, method, path)
            assert status == 401
            status, _ = await call(running.url, method, path, {"Authorization": "Bearer wrong"})
            assert status == 401
        assert (await call(running.url, "GET", "/runguard/metrics", AUTH))[0] == 200
        assert (await call(running.url, "POST", "/runguard/runs/r/reset", AUTH))[0] == 200
        status, body = await call(running.url, "GET", "/runguard/runs", AUTH)
        assert status == 501 and "record store" in body["error"]
        assert (await call(running.url, "GET", "/runguard/trips", AUTH))[0] == 501
        assert (await call(running.url, "GET", "/runguard/health"))[0] == 200
    finally:
        await running.stop()


async def test_bound_beyond_loopback_without_token_disables_admin(upstream: FakeUpstream) -> None:
    running = await start_proxy(settings_for(upstream.url, server={"host": "0.0.0.0"}), detectors=[])
    try:
        for method, path in (
            ("GET", "/runguard/runs/r"),
            ("POST", "/runguard/runs/r/reset"),
            ("POST", "/runguard/keys/k/reset"),
        ):
            status, body = await call(running.url, method, path)
            assert status == 403 and "disabled" in body["error"]
        assert (await call(running.url, "GET", "/runguard/metrics"))[0] == 200
        assert (await call(running.url, "GET", "/runguard/health"))[0] == 200
    finally:
        await running.stop()


async def test_reset_reopens_a_stopped_run(blocking: tuple[str, ListSink, MemoryState]) -> None:
    url, _, _ = blocking
    sdk = sdk_for(url, "run-reset-1")
    try:
        await ask(sdk)
        await ask(sdk)
        for _ in range(2):  # the trip, then the open breaker
            with pytest.raises(openai.RateLimitError):
                await ask(sdk)
        status, detail = await call(url, "GET", "/runguard/runs/run-reset-1")
        assert status == 200
        assert detail["breaker"]["state"] == "open" and detail["breaker"]["detector"] == "max_requests"
        assert detail["live"]["requests"] == 4 and detail["timeline"] is None and detail["store"] is False
        assert not any("." in name for name in detail["live"])  # named fields, no internal state keys
        status, result = await call(url, "POST", "/runguard/runs/run-reset-1/reset")
        assert (status, result) == (
            200,
            {"run_id": "run-reset-1", "tenant": KeyHasher(b"test-salt").hash(KEY), "cleared": True, "recorded": False},
        )
        await ask(sdk)  # goes through again
        status, detail = await call(url, "GET", "/runguard/runs/run-reset-1")
        assert detail["breaker"] == {"state": "closed"}
        assert KEY not in str(detail)
    finally:
        await sdk.close()
    assert (await call(url, "GET", "/runguard/runs/never-seen"))[0] == 404
    assert (await call(url, "POST", "/runguard/runs/never-seen/reset"))[1]["cleared"] is False


async def test_key_reset_clears_key_and_key_model_breakers(blocking: tuple[str, ListSink, MemoryState]) -> None:
    url, sink, state = blocking
    sdk = sdk_for(url, "run-key-1")
    try:
        await ask(sdk)
        first = sink.records[0]
        assert isinstance(first, RequestRecord)
        key_hash = first.key_hash
        opened = BreakerRecord(BreakerState.OPEN, 1e12, 600.0, 1, "budget", "daily budget spent")
        ids = ScopeIds("run-key-1", key_hash, f"{key_hash}|gpt-4o-mini", f"{key_hash}|day")
        await state.execute(
            ids, [Put(Scope.KEY, "breaker", opened.dumps()), Put(Scope.KEY_MODEL, "breaker", opened.dumps())]
        )
        with pytest.raises(openai.RateLimitError):
            await ask(sdk)
        status, result = await call(url, "POST", f"/runguard/keys/{key_hash}/reset?model=gpt-4o-mini")
        assert status == 200
        cleared = {"key": True, "key_model": True}
        assert result == {"key_hash": key_hash, "model": "gpt-4o-mini", "cleared": cleared, "recorded": False}
        other = sdk_for(url, "run-key-2")  # the key's breakers are gone for every run of the key
        await ask(other)
        await other.close()
    finally:
        await sdk.close()
    assert await state.read_scope(Scope.KEY_MODEL, f"{key_hash}|gpt-4o-mini") == {}


class FakeRuns:
    async def recent(self, limit: int) -> Sequence[Mapping[str, Any]]:
        return [{"run_id": f"run-{i}"} for i in range(limit)]

    async def timeline(self, run_id: str) -> Sequence[Mapping[str, Any]] | None:
        return [{"index": 1, "agent": "planner"}] if run_id == "stored" else None

    async def one(self, run_id: str) -> Mapping[str, Any] | None:
        return {"run_id": run_id, "status": "completed"} if run_id == "stored" else None


class FakeTrips:
    async def recent(self, limit: int, run_id: str | None = None) -> Sequence[Mapping[str, Any]]:
        return [{"run_id": run_id or "any", "detector": "spiral"}]


class FakeReader:
    runs = FakeRuns()
    trips = FakeTrips()


async def test_listings_and_timeline_come_from_an_installed_store_reader(upstream: FakeUpstream) -> None:
    app = create_app(settings_for(upstream.url), detectors=[])
    app[STORE_READER] = FakeReader()
    running: Running = await start(app, "127.0.0.1", 0, grace=1.0)
    try:
        status, body = await call(running.url, "GET", "/runguard/runs?limit=3")
        assert status == 200 and [r["run_id"] for r in body["runs"]] == ["run-0", "run-1", "run-2"]
        status, body = await call(running.url, "GET", "/runguard/trips?run_id=r9")
        assert status == 200 and body["trips"] == [{"run_id": "r9", "detector": "spiral"}]
        status, body = await call(running.url, "GET", "/runguard/runs/stored")
        assert status == 200 and body["timeline"] == [{"index": 1, "agent": "planner"}] and body["store"] is True
        assert body["status"] == "completed" and body["summary"] == {"run_id": "stored", "status": "completed"}
        for path, given in (("/runguard/runs?limit=lots", "'lots'"), ("/runguard/trips?limit=1.5", "'1.5'")):
            # a JSON error, as every other refusal of the admin API
            assert await call(running.url, "GET", path) == (400, {"error": f"limit must be an integer, got {given}"})
        for limit in ("0", "-5"):  # as the CLI refuses -n 0
            assert await call(running.url, "GET", f"/runguard/runs?limit={limit}") == (
                400,
                {"error": f"limit must be at least 1, got {limit}"},
            )
    finally:
        await running.stop()


class _Down:
    """Every read fails as a database that is down fails."""

    async def _down(self, *args: object) -> None:
        raise ConnectionRefusedError("database down")

    recent = one = timeline = _down


class _DownReader:
    runs = trips = _Down()


async def test_admin_answers_503_while_the_store_is_down(upstream: FakeUpstream) -> None:
    app = create_app(settings_for(upstream.url, store={"database_url": ""}), detectors=[])
    app[STORE_READER] = _DownReader()
    running = await start(app, "127.0.0.1", 0, grace=1.0)
    try:
        async with httpx.AsyncClient(base_url=running.url) as admin:
            for path in ("/runguard/runs", "/runguard/trips", "/runguard/runs/r1"):
                response = await admin.get(path)
                assert response.status_code == 503 and "record store is unavailable" in response.json()["error"]
    finally:
        await running.stop()


class _Resets:
    """A resets log that keeps what it is given, or fails like a database that is down."""

    def __init__(self, down: bool = False) -> None:
        self.kept: list[tuple[str, str, str | None]] = []
        self._down = down

    async def record(self, scope: str, target: str, tenant: str | None = None) -> float:
        if self._down:
            raise ConnectionRefusedError("database down")
        self.kept.append((scope, target, tenant))
        return 1.0


@pytest.mark.parametrize("down", [False, True])
async def test_each_reset_is_kept_in_the_store_and_a_store_down_does_not_stop_it(
    upstream: FakeUpstream, down: bool
) -> None:
    app = create_app(settings_for(upstream.url, store={"database_url": ""}), detectors=[])
    resets = app[RESET_LOG] = _Resets(down)
    running = await start(app, "127.0.0.1", 0, grace=1.0)
    try:
        status, run = await call(running.url, "POST", "/runguard/runs/run-9/reset?tenant=team")
        assert status == 200 and run["recorded"] is not down
        status, key = await call(running.url, "POST", "/runguard/keys/k_abc/reset?model=gpt-4o")
        assert status == 200 and key["recorded"] is not down and set(key["cleared"]) == {"key", "key_model"}
    finally:
        await running.stop()
    assert resets.kept == (
        [] if down else [("run", "run-9", "team"), ("key", "k_abc", None), ("key_model", "k_abc|gpt-4o", None)]
    )
