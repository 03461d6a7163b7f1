"""Requests whose RunGuard headers carry bytes that are not UTF-8, from a client that sends raw HTTP.

No SDK sends such headers (httpx refuses them), but a proxy meets every client.
aiohttp hands such bytes over as lone surrogates, which no encoder takes: the
key's hash failed (a 500), and a run id broke the access log line and stalled
the record store (its batch was retried forever, with every record behind it).
(On the way upstream, aiohttp's client drops such bytes from the headers it
writes; no provider takes such a key anyway.)
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

BODY = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})


async def _post(url: str, run_id: bytes, key: bytes) -> bytes:
    """One chat request over a raw connection; the status line of the answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + key + b"\r\nX-Run-Id: " + run_id + b"\r\nX-Agent-Name: planner-\xe9\r\n"
        b"Content-Length: " + str(len(BODY)).encode() + b"\r\nConnection: close\r\n\r\n"
    )
    writer.write(head + BODY)
    answer = await reader.read()
    writer.close()
    return answer.split(b"\r\n", 1)[0]


def _stored(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT run_id, agent FROM requests").fetchall())


async def test_header_bytes_that_are_not_utf8_are_served_logged_and_stored_escaped(
    upstream: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion("ok", usage=(20, 4)))
    database = tmp_path / "runguard.db"
    settings = settings_for(
        upstream.url, store={"database_url": f"sqlite+aiosqlite:///{database}", "flush_interval": 0.02}
    )
    running = await start_proxy(settings)
    try:
        assert await _post(running.url, b"run-\xff\xfe", b"sk-test") == b"HTTP/1.1 200 OK"
        assert await _post(running.url, b"run-odd-key", b"sk-\xff") == b"HTTP/1.1 200 OK"
        assert await _post(running.url, b"run-plain", b"sk-test") == b"HTTP/1.1 200 OK"
        await eventually(lambda: len(_stored(database)) == 3)
    finally:
        await running.stop()
    agent = "planner-\\xe9"  # a Latin-1 byte: not UTF-8 either
    assert _stored(database) == [("run-\\xff\\xfe", agent), ("run-odd-key", agent), ("run-plain", agent)]
    assert len(upstream.received) == 3
    logged = [orjson.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [entry["run_id"] for entry in logged] == ["run-\\xff\\xfe", "run-odd-key", "run-plain"]
    assert logged[0]["key_hash"] == logged[2]["key_hash"] != logged[1]["key_hash"]
