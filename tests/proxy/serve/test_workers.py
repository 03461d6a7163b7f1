"""`runguard-proxy serve --workers N` as real processes: one port, every worker serving, one run's cap across
them on Redis, refused on in-memory state, and every worker stopped by one SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import httpx
import pytest
import redis.asyncio as aioredis
import yaml

from tests.e2e import payloads
from tests.services import require_redis, unique_name
from tests.support.processes import ServeProcess, console_script, start_serve
from tests.support.upstream import FakeUpstream, Received, Reply

pytestmark = [pytest.mark.redis, pytest.mark.slow]
CHAT = "/v1/chat/completions"


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def _gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "zombie" in status.read_text()


def _bytes_read(pid: int) -> int:
    """What a process has read through system calls, sockets included (`rchar`)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


@pytest.fixture
async def workers(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[ServeProcess]:
    url = require_redis()
    prefix = unique_name("rgperfworkers")
    config = tmp_path / "workers.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "upstreams": {"openai": upstream.url, "gemini": upstream.url},
                "runs": {"key_salt": "workers-test-salt"},
                "state": {"url": url, "key_prefix": prefix},
                "store": {"database_url": ""},
            }
        )
    )
    served = await start_serve({}, tmp_path, "--config", str(config), "--workers", "2")
    try:
        yield served
    finally:
        await served.stop()
        client = aioredis.from_url(url)
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def _ask(url: str, headers: dict[str, str], text: str = "hi") -> str:
    """One chat request on a connection of its own (the kernel picks a worker per connection): its status,
    and the detector that stopped it if one did."""
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{url}/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]},
            headers={"Authorization": "Bearer sk-workers", **headers},
        )
        trip = response.headers.get("x-runguard-trip")
        return f"{response.status_code} {trip}" if trip else str(response.status_code)


async def test_two_workers_share_the_port_and_one_run_s_cap(upstream: FakeUpstream, workers: ServeProcess) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok"))
    pids = _children(workers.process.pid)
    assert len(pids) == 2, workers.diagnostics()
    before = {pid: _bytes_read(pid) for pid in pids}
    statuses = [await _ask(workers.url, {"X-Run-Id": f"run-spread-{i}"}) for i in range(40)]
    assert statuses == ["200"] * 40
    grown = {pid: _bytes_read(pid) - before[pid] for pid in pids}
    # 40 connections hashed over two workers: each served some (a request is about 300 bytes read).
    assert all(value > 1500 for value in grown.values()), grown
    # One run, its cap of 4 requests, its requests on 12 connections spread over both workers.
    capped = {"X-Run-Id": "run-capped-across-workers", "X-RunGuard-Max-Requests": "4"}
    statuses = [await _ask(workers.url, capped, f"step {i}") for i in range(12)]
    assert statuses == ["200"] * 4 + ["429 max_requests"] * 8, workers.diagnostics()


async def test_one_sigterm_stops_every_worker(workers: ServeProcess) -> None:
    pids = _children(workers.process.pid)
    assert len(pids) == 2
    assert await workers.stop(signal.SIGTERM) == 0, workers.diagnostics()
    assert all(_gone(pid) for pid in pids)


async def test_more_than_one_worker_on_in_memory_state_is_refused(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        console_script(),
        "serve",
        "--port",
        "0",
        "--workers",
        "2",
        env={"RUNGUARD_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        stderr=asyncio.subprocess.PIPE,
    )
    _, said = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert b"needs shared run state" in said


async def _opened(url: str, count: int) -> list[aiohttp.ClientSession]:
    """`count` clients, each with one connection already open (and so already on a worker)."""
    sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) for _ in range(count)]
    for session in sessions:
        async with session.get(url + "/runguard/health") as answer:
            await answer.read()
    return sessions


async def test_a_streamed_trip_stops_followers_on_every_worker(upstream: FakeUpstream, workers: ServeProcess) -> None:
    """The attack: a run's streamed response takes it past its token cap, and the moment the client has the
    stream's `[DONE]`, eight requests of that run go out on connections opened before, spread over both
    workers. Followers once slipped through on the other worker (14 of 120), its state batch running
    before the stream's end was judged; now the end is marked pending in Redis before the stream's last
    bytes go out, and a follower on any worker waits for it."""

    def answers(request: Received) -> Reply:
        if request.json().get("stream"):
            return Reply.sse(payloads.chat_stream("streamed", with_usage=True))  # 13 tokens
        return Reply.json(payloads.chat_completion("slipped through"))

    upstream.script = answers
    ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}]}
    slipped: list[str] = []
    for round_ in range(8):
        headers = {
            "Authorization": "Bearer sk-workers",
            "X-Run-Id": f"streamed-{round_}",
            "X-RunGuard-Max-Tokens": "10",
        }
        followers = await _opened(workers.url, 8)
        try:
            async with (
                aiohttp.ClientSession() as streaming,
                streaming.post(workers.url + CHAT, json={**ask, "stream": True}, headers=headers) as stream,
            ):
                seen = b""
                while b"[DONE]" not in seen:
                    seen += await stream.content.readany()

                async def follow(session: aiohttp.ClientSession, headers: dict[str, str] = headers) -> str:
                    async with session.post(workers.url + CHAT, json=ask, headers=headers) as answer:
                        await answer.read()
                        return f"{answer.status} {answer.headers.get('x-runguard-trip')}"

                statuses = await asyncio.gather(*(follow(session) for session in followers))
        finally:
            await asyncio.gather(*(session.close() for session in followers))
        slipped += [status for status in statuses if status != "429 max_tokens"]
    assert slipped == [], workers.diagnostics()
