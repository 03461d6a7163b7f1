"""SIGTERM to the real `serve` process: the grace period bounds the whole stop, streams still open at its
end get their provider's error event, and records the database could not take are counted exactly."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import openai
import orjson
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.proxy.store.conftest import count, drop_schema, with_schema
from tests.proxy.store.tcp_relay import TcpRelay
from tests.services import require_postgres, unique_name
from tests.support.processes import ServeProcess, start_serve
from tests.support.upstream import FakeUpstream, Received, Reply, closed_port

pytestmark = pytest.mark.slow

GRACE = 2.0
GEMINI_STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


def _env(upstream: FakeUpstream, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "RUNGUARD_OPENAI_UPSTREAM": upstream.url,
        "RUNGUARD_GEMINI_UPSTREAM": upstream.url,
        "RUNGUARD_KEY_SALT": "shutdown-test",
        "RUNGUARD_HOME": str(tmp_path / "home"),
        "RUNGUARD_SERVER__SHUTDOWN_GRACE_SECONDS": str(GRACE),
        **extra,
    }


async def _stopped_in(served: ServeProcess) -> tuple[int, float]:
    """SIGTERM; the exit code and the seconds the stop took (the harness kills it after 15 s)."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    code = await served.stop(signal.SIGTERM, wait_seconds=15)
    return code, loop.time() - began


@pytest.mark.postgres
async def test_records_a_database_outage_loses_at_sigterm_are_counted_exactly_within_the_grace(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    base = require_postgres()
    schema = unique_name("rg_shutdown")
    relay = TcpRelay(closed_port(), "127.0.0.1", 5432)
    await relay.up()
    through_relay = re.sub(r"@[^/]+/", f"@127.0.0.1:{relay.port}/", base, count=1)
    direct = with_schema(base, schema)
    upstream.script = lambda _: Reply.json(payloads.chat_completion("fine"))
    env = _env(
        upstream,
        tmp_path,
        RUNGUARD_DATABASE_URL=with_schema(through_relay, schema),
        RUNGUARD_STORE__FLUSH_INTERVAL="0.05",
    )
    served = await start_serve(env, tmp_path)
    try:
        async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:

            async def ask(i: int) -> None:
                body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"question {i}"}]}
                headers = {"Authorization": "Bearer sk-outage-0123456789", "X-Run-Id": "outage"}
                response = await http.post("/v1/chat/completions", json=body, headers=headers)
                assert response.status_code == 200

            await ask(0)
            for _ in range(100):  # the store works: the first record is in
                if await count(direct, "requests") == 1:
                    break
                await asyncio.sleep(0.05)
            assert await count(direct, "requests") == 1, served.diagnostics()
            await relay.down()  # PostgreSQL is gone from here on
            for i in range(1, 51):
                await ask(i)
        # A batch is in the writer's hands, retrying (it says so), and the rest waits in the queue.
        await eventually(lambda: "failed, retrying" in served.text(), within=10.0)
        code, took = await _stopped_in(served)
    finally:
        await relay.down()
        await drop_schema(base, schema)
    assert code == 0, served.diagnostics()
    assert took < GRACE + 2.0, (took, served.diagnostics())  # the grace bounds the stop, not the store's 30 s
    assert "shutdown gave up" in served.text() and " 50 records not written" in served.text(), served.diagnostics()


async def _read_chat(client: openai.AsyncOpenAI, began: asyncio.Event) -> str:
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True
    )

    async def read() -> None:
        async for _chunk in stream:
            began.set()

    with pytest.raises(openai.APIError) as caught:
        await read()
    assert not isinstance(caught.value, openai.APIStatusError)  # the in-stream error event
    return caught.value.message


async def _read_responses(client: openai.AsyncOpenAI, began: asyncio.Event) -> str:
    events: list[Any] = []
    try:
        async with client.responses.stream(model="gpt-4o", input="hello") as stream:
            async for event in stream:
                events.append(event)
                began.set()
    except openai.APIError as exc:
        return exc.message
    assert events[-1].type == "error"
    return str(events[-1].message)


async def _read_gemini(client: genai.Client, began: asyncio.Event) -> str:
    chunks = await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")

    async def read() -> None:
        async for _chunk in chunks:
            began.set()

    with pytest.raises(genai_errors.ServerError) as caught:
        await read()
    assert caught.value.status == "UNAVAILABLE"
    return str(caught.value.message)


async def _read_gemini_array(url: str, began: asyncio.Event) -> str:
    """`:streamGenerateContent` without alt=sse, as a plain HTTP client reads it: one JSON array."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + GEMINI_STREAM, json={"contents": [{"parts": [{"text": "hi"}]}]}) as response,
    ):
        assert response.status == 200
        body = await response.content.readany()
        began.set()
        body += await response.read()
    elements = orjson.loads(body)  # valid JSON: the error is an element, not an SSE line spliced in
    assert elements[0]["candidates"][0]["content"]["parts"][0]["text"] == "Gemin"
    assert list(elements[-1]) == ["error"] and next(iter(elements[-1]["error"])) == "code"
    return str(elements[-1]["error"]["message"])


def _never_ending(request: Received) -> Reply:
    """Every stream sends its first part, then goes silent with its connection open."""
    if request.path.endswith(":streamGenerateContent") and "alt=sse" not in request.query:
        first, second = (orjson.loads(chunk.removeprefix(b"data: ")) for chunk in payloads.gemini_stream())
        second_element = orjson.dumps(second)
        # The second element is half-sent when the upstream goes silent.
        parts = [b"[" + orjson.dumps(first), b"\n,\r\n" + second_element[:20], second_element[20:] + b"]"]
        return Reply(200, b"", {"Content-Type": "application/json"}, chunks=parts, stall_after=2)
    if "generateContent" in request.path:
        return Reply.sse(payloads.gemini_stream("Gemini streams"), stall_after=1)
    if request.path.endswith("/responses"):
        return Reply.sse(payloads.responses_stream("half an answer"), stall_after=3)
    return Reply.sse(payloads.chat_stream("partial text"), stall_after=2)


async def test_streams_open_at_the_end_of_the_grace_get_their_providers_error(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.script = _never_ending
    served = await start_serve(_env(upstream, tmp_path, RUNGUARD_DATABASE_URL=""), tmp_path)
    oai = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-cut-0123456789", max_retries=0)
    gem = genai.Client(api_key="g-cut", http_options=types.HttpOptions(base_url=served.url))
    began = [asyncio.Event() for _ in range(4)]
    readers = [
        asyncio.ensure_future(_read_chat(oai, began[0])),
        asyncio.ensure_future(_read_responses(oai, began[1])),
        asyncio.ensure_future(_read_gemini(gem, began[2])),
        asyncio.ensure_future(_read_gemini_array(served.url, began[3])),
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in began)), 15)
        code, took = await _stopped_in(served)
        messages = await asyncio.wait_for(asyncio.gather(*readers), 5)
    finally:
        for reader in readers:
            reader.cancel()
        await oai.close()
    assert code == 0, served.diagnostics()
    assert took < GRACE + 2.0, (took, served.diagnostics())
    assert all("shutting down" in message for message in messages), messages


async def test_five_live_streams_end_within_the_grace_and_log_no_traceback(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Five chat streams still open at SIGTERM: the stop takes no longer than its grace period (plus the
    process's own exit), and cutting them logs no aiohttp `InvalidStateError` traceback."""
    upstream.script = _never_ending
    served = await start_serve(_env(upstream, tmp_path, RUNGUARD_DATABASE_URL=""), tmp_path)
    oai = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="sk-cut-0123456789", max_retries=0)
    began = [asyncio.Event() for _ in range(5)]
    readers = [asyncio.ensure_future(_read_chat(oai, event)) for event in began]
    try:
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in began)), 15)
        code, took = await _stopped_in(served)
        messages = await asyncio.wait_for(asyncio.gather(*readers), 5)
    finally:
        for reader in readers:
            reader.cancel()
        await oai.close()
    assert code == 0, served.diagnostics()
    assert took < GRACE + 1.0, (took, served.diagnostics())
    assert all("shutting down" in message for message in messages), messages
    log = served.text()
    assert "InvalidStateError" not in log and "Traceback" not in log, served.diagnostics()
