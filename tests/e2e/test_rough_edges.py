"""Rough edges a new user meets first: environment variables, breaker refusals, where the banner goes."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import aiohttp
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.ops import Op, OpResult, Scope
from runguard.proxy.guard.accounting import request_ops
from runguard.proxy.runs import tenants
from runguard.proxy.runs.keys import ANONYMOUS
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from tests.e2e import payloads
from tests.e2e.faults import proxy
from tests.support.processes import console_script, start_serve
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply


async def _cli(env: dict[str, str], cwd: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        console_script(),
        *args,
        env={**os.environ, **env},
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode if process.returncode is not None else -1, out.decode()


async def test_the_environment_reset_help_advertises_and_a_numeric_token_work_everywhere(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    env = {
        "RUNGUARD_PROXY_URL": "http://127.0.0.1:8787",  # what `reset --help` tells users to set
        "RUNGUARD_SERVER__ADMIN_TOKEN": "12345",  # a token that happens to look like a number
        "RUNGUARD_OPENAI_UPSTREAM": upstream.url,
        "RUNGUARD_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/runguard.db",
        "RUNGUARD_HOME": str(tmp_path / "home"),
    }
    served = await start_serve(env, tmp_path)
    try:
        async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:
            assert (await http.get("/runguard/runs")).status_code == 401
            allowed = await http.get("/runguard/runs", headers={"Authorization": "Bearer 12345"})
            assert allowed.status_code == 200, allowed.text
    finally:
        assert await served.stop() == 0, served.diagnostics()
    for command in (("config", "show"), ("runs",)):  # the store exists now: `runs` has something to read
        code, out = await _cli(env, tmp_path, *command)
        assert code == 0, (command, out)


async def test_a_breaker_refusal_says_when_to_retry_in_retry_after(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json({"error": {"message": "overloaded"}}, status=503)
    sink = ListSink()
    async with proxy(upstream.url, sink) as url:
        client = openai.AsyncOpenAI(
            base_url=url + "/v1", api_key="sk-retry-0123456789", max_retries=0, default_headers={"X-Run-Id": "retry"}
        )
        for _ in range(2):  # two upstream failures open the key+model breaker for 60 s
            with pytest.raises(openai.InternalServerError):
                await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "1"}])
        upstream.script = lambda _: Reply.json(payloads.chat_completion("fine"))
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "2"}])
        await client.close()
    headers = caught.value.response.headers
    assert headers["x-runguard-trip"] == "retry_cascade"
    said = re.search(r"retry in (\d+) s", caught.value.message)
    assert said is not None, caught.value.message
    assert headers["retry-after"] == said.group(1)  # whole seconds, as the message says
    assert 59 <= int(headers["retry-after"]) <= 60  # rounded up: never earlier than the breaker reopens


async def test_serve_refuses_to_start_with_the_compose_examples_old_placeholder_secrets(tmp_path: Path) -> None:
    env = {
        "RUNGUARD_KEY_SALT": "change-me-to-a-long-random-string",
        "RUNGUARD_ADMIN_TOKEN": "change-me-admin-token",
        "RUNGUARD_HOME": str(tmp_path / "home"),
        "RUNGUARD_DATABASE_URL": "",
    }
    code, out = await _cli(env, tmp_path, "serve", "--port", "0")
    assert code == 2, out
    assert "server.admin_token" in out and "runs.key_salt" in out and "placeholder" in out
    assert "listening on" not in out


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"X-RunGuard-Limit": "spirall.threshold=0.5"}, "spirall: no such detector"),
        ({"X-RunGuard-Limit": "budget.run_ud=0.5"}, "budget.run_ud: no such field"),
        ({"X-RunGuard-Max-Requests": "abc"}, "max_requests.limit='abc'"),
    ],
    ids=["unknown-detector", "typo-field", "not-a-number"],
)
async def test_an_invalid_runguard_header_is_refused_with_a_provider_400_naming_it(
    upstream: FakeUpstream, headers: dict[str, str], named: str
) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("fine"))
    async with proxy(upstream.url) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-hdr-0123456789", max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
            )
        gemini = genai.Client(
            api_key="g-hdr", http_options=types.HttpOptions(base_url=url, headers={"X-Run-Id": "g", **headers})
        )
        with pytest.raises(genai_errors.ClientError) as refused:
            await gemini.aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
        await client.close()
    assert named in caught.value.message and caught.value.code == "invalid_runguard_header"
    assert refused.value.code == 400 and named in str(refused.value.message)
    assert upstream.received == []  # refused before anything went upstream


async def test_a_loosening_runguard_header_is_ignored_with_a_warning(upstream: FakeUpstream) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("fine"))
    async with proxy(upstream.url, guard={"detectors": {"max_requests": {"limit": 5}}}) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-hdr-0123456789", max_retries=0)
        response = await client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-RunGuard-Max-Requests": "500"},
        )
        await client.close()
    assert response.http_response.status_code == 200
    warning = response.headers["x-runguard-warning"]
    assert "max_requests.limit=500 ignored" in warning and "configured: 5" in warning


@pytest.fixture
def python_recursion_limit() -> Iterator[None]:
    """Python's default recursion limit for the test (a library run earlier in the session may leave it
    raised, and the validator failure below is a RecursionError)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(before)


@pytest.mark.usefixtures("python_recursion_limit")
async def test_a_validator_failure_in_structured_output_is_counted_not_passed_as_valid(
    upstream: FakeUpstream,
) -> None:
    # A recursive schema and an answer nested 900 deep: jsonschema itself gives up (RecursionError).
    nested = {"$ref": "#/$defs/n", "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "nested", "schema": nested}}
    upstream.script = lambda _: Reply.json(payloads.chat_completion("[" * 900 + "]" * 900))
    async with proxy(upstream.url) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-schema-0123456789", max_retries=0)
        for _ in range(2):
            await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "nest"}], response_format=fmt
            )
        await client.close()
        async with httpx.AsyncClient(base_url=url) as http:
            metrics = (await http.get("/runguard/metrics")).text
    faults = re.search(
        r'runguard_detector_faults_total\{detector="structured_output",hook="plan_response"\} (\S+)', metrics
    )
    assert faults is not None and float(faults.group(1)) == 2.0, metrics


class HeldReplyThenClosed(MemoryState):
    """In-memory state whose request batch runs but answers only at `go` (a Redis reply on its way), and
    that refuses every batch once closed, as a closed Redis pool does."""

    never_waits = False

    def __init__(self) -> None:
        super().__init__()
        self.ran, self.go, self.closed = asyncio.Event(), asyncio.Event(), False

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        if self.closed:
            raise StateUnavailable("the state backend is closed")
        results = await super().execute(ids, ops)
        if ops and ops[0] == request_ops(0.0, "")[0] and not self.go.is_set():
            self.ran.set()
            await self.go.wait()
        return results

    async def close(self) -> None:
        self.closed = True  # what it holds stays, as in a Redis server other replicas share


async def test_shutdown_waits_for_the_undo_of_an_abandoned_request_so_its_slot_is_given_back(
    upstream: FakeUpstream,
) -> None:
    state = HeldReplyThenClosed()
    running = await start_proxy(settings_for(upstream.url), state=state)
    async with aiohttp.ClientSession() as session:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        sending = asyncio.ensure_future(
            session.post(running.url + "/v1/chat/completions", json=body, headers={"X-Run-Id": "abandoned"})
        )
        await state.ran.wait()
        sending.cancel()  # the client leaves while its request's batch is on its way: the slot is taken
        with pytest.raises(asyncio.CancelledError):
            await sending
    asyncio.get_running_loop().call_later(0.3, state.go.set)  # the batch answers during the shutdown
    await running.stop()
    # A request without a key acts for the anonymous tenant (`tenants`): its run's state is under that name.
    assert (await state.read_scope(Scope.RUN, tenants.state_id(ANONYMOUS, "abandoned")))["core.inflight"] == 0.0


async def test_an_invalid_runguard_header_on_a_websocket_handshake_is_refused_too(upstream: FakeUpstream) -> None:
    async with proxy(upstream.url) as url, aiohttp.ClientSession() as session:
        headers = {"Authorization": "Bearer sk-ws-0123456789", "X-RunGuard-Limit": "max_requests.limit=abc"}
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(url.replace("http", "ws", 1) + "/v1/realtime?model=gpt-realtime", headers=headers)
    assert caught.value.status == 400
    assert upstream.handshakes == []  # refused before the provider was asked
