"""Stops and spend survive a restart of the real `serve` process: the state is rebuilt from the records.

Each test runs `runguard-proxy serve` with in-memory state and a record store (a SQLite file, or a
PostgreSQL schema of its own), drives it with the openai SDK to a spent key budget, a latched run,
an open key breaker, a reset run and a healthy run, stops it (SIGTERM, as a deploy does) and starts a
new process on the same store. The new process must refuse what the old one refused, without a
word to the upstream, let the reset run through, and carry the healthy run's counters on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.e2e import payloads
from tests.proxy.store.conftest import drop_schema, with_schema
from tests.services import require_postgres, unique_name
from tests.support.processes import ServeProcess, start_serve
from tests.support.served import write_config
from tests.support.upstream import FakeUpstream, Received, Reply

pytestmark = pytest.mark.slow

BUDGET_KEY, LATCH_KEY, FAILING_KEY, HEALTHY_KEY = "sk-spent-key", "sk-latch-key", "sk-failing-key", "sk-healthy-key"
# gpt-4o-mini: $0.15 per million input tokens, so 8M tokens are $1.20: past the key's $1.00 a day.
COSTLY = payloads.chat_completion(usage=(8_000_000, 5))
FAILING_MODEL = "gpt-4o"


def script(received: Received) -> Reply:
    """A costly answer for the budget key, upstream failures for the failing key's model, else a cheap one."""
    auth = received.headers.get("Authorization", "")
    if auth.endswith(BUDGET_KEY):
        return Reply.json(COSTLY)
    if auth.endswith(FAILING_KEY) and received.json().get("model") == FAILING_MODEL:
        return Reply.json({"error": {"message": "upstream is down", "type": "server_error"}}, status=500)
    return Reply.json(payloads.chat_completion())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/runguard.db"
        return
    base, schema = require_postgres(), unique_name("rg_restart")
    yield with_schema(base, schema)
    await drop_schema(base, schema)


Serve = Callable[[], Any]
SALT = "restart-test-salt"


def restart_config(upstream_url: str, database_url: str, **state: Any) -> dict[str, Any]:
    """The settings of these tests: a key budget of $1.00 a day, records in `database_url`, `state` as given."""
    return {
        "upstreams": {"openai": upstream_url, "gemini": upstream_url},
        "runs": {"key_salt": SALT},
        "store": {"database_url": database_url, "flush_interval": 0.05},
        "state": state,
        "guard": {"detectors": {"budget": {"key_daily_usd": 1.0}}},
    }


@pytest.fixture
async def serve(upstream: FakeUpstream, tmp_path: Path, database_url: str) -> AsyncIterator[Serve]:
    """serve() -> a new `serve` process on the test's store (memory state); all stopped after the test."""
    upstream.script = script
    config = write_config(tmp_path, restart_config(upstream.url, database_url))
    started: list[ServeProcess] = []

    async def make() -> ServeProcess:
        served = await start_serve({}, tmp_path, "--config", str(config))
        started.append(served)
        return served

    yield make
    for served in started:
        await served.stop()


def _client(url: str, key: str, run_id: str, **headers: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=url + "/v1", api_key=key, max_retries=0, default_headers={"X-Run-Id": run_id, **headers}
    )


async def _ask(url: str, key: str, run_id: str, model: str = "gpt-4o-mini", **headers: str) -> str:
    """'ok', or the error code the proxy (or the upstream) answered with."""
    client = _client(url, key, run_id, **headers)
    try:
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": f"step of {run_id}"}])
    except openai.APIStatusError as exc:
        return str(exc.code or exc.status_code)
    finally:
        await client.close()
    return "ok"


async def _reset(url: str, run_id: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.post(f"{url}/runguard/runs/{run_id}/reset", json={}) as reply:
        assert reply.status == 200
        answer: dict[str, Any] = await reply.json()
        return answer


CAP_ONE = {"X-RunGuard-Max-Requests": "1"}
CAP_THREE = {"X-RunGuard-Max-Requests": "3"}


async def stop_and_spend(url: str) -> None:
    """Drive a proxy to a spent key, a latched run, a reset run, an open key breaker and a healthy run."""
    # The key's day: $1.20 of a $1.00 budget, and its next request is refused.
    assert await _ask(url, BUDGET_KEY, "spender-1") == "ok"
    assert await _ask(url, BUDGET_KEY, "spender-2") == "runguard_budget"
    # A run past its cap is latched; another is latched, then reset by the operator.
    for run_id in ("latched-run", "released-run"):
        assert await _ask(url, LATCH_KEY, run_id, **CAP_ONE) == "ok"
        assert await _ask(url, LATCH_KEY, run_id, **CAP_ONE) == "runguard_max_requests"
    assert (await _reset(url, "released-run"))["recorded"] is True
    # Two upstream failures in a row open the key's breaker for that model.
    assert await _ask(url, FAILING_KEY, "failing-run", FAILING_MODEL) == "500"
    assert await _ask(url, FAILING_KEY, "failing-run", FAILING_MODEL) == "500"
    assert await _ask(url, FAILING_KEY, "failing-run", FAILING_MODEL) == "runguard_retry_cascade"
    # A healthy run, two steps of its three.
    for _ in range(2):
        assert await _ask(url, HEALTHY_KEY, "healthy-run", **CAP_THREE) == "ok"


async def still_stopped(url: str, upstream: FakeUpstream, diagnostics: str = "") -> None:
    """What `stop_and_spend` stopped is still refused (nothing reaches the upstream), the reset run goes on,
    and the healthy run's counters carry on (counted once: its third step passes, its fourth is refused)."""
    before = len(upstream.received)
    assert await _ask(url, BUDGET_KEY, "spender-3") == "runguard_budget", diagnostics
    assert await _ask(url, LATCH_KEY, "latched-run", **CAP_ONE) == "runguard_max_requests", diagnostics
    assert await _ask(url, FAILING_KEY, "failing-run-2", FAILING_MODEL) == "runguard_retry_cascade", diagnostics
    assert len(upstream.received) == before, "a refused request reached the upstream"
    # The released run goes on (one request of its new cap), and the healthy run's third step is its last.
    assert await _ask(url, LATCH_KEY, "released-run", **CAP_ONE) == "ok", diagnostics
    assert await _ask(url, HEALTHY_KEY, "healthy-run", **CAP_THREE) == "ok", diagnostics
    assert await _ask(url, HEALTHY_KEY, "healthy-run", **CAP_THREE) == "runguard_max_requests", diagnostics
    # Other keys and runs are untouched by all this.
    assert await _ask(url, HEALTHY_KEY, "fresh-run") == "ok"


async def test_stops_and_spend_survive_a_restart(serve: Serve, upstream: FakeUpstream) -> None:
    first = await serve()
    await stop_and_spend(first.url)
    assert await first.stop() == 0, first.diagnostics()
    second = await serve()
    await still_stopped(second.url, upstream, second.diagnostics())
    assert "state rebuilt from the records" in second.text()
