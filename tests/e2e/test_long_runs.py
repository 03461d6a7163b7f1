"""A long agent loop is judged the same whether its requests are read from checkpoints or whole.

The openai SDK drives a tool loop through the real proxy: every request resends
the growing conversation, past the size where the proxy reads a request from
where the run's last one left off. The `context_window` detector, which reads
the whole conversation's size, must warn and stop at the same request either
way, and every record must carry the same verdicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from google import genai
from google.genai import types

from runguard.proxy.store.records import RequestRecord
from tests.e2e import payloads
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

MODEL = "gpt-long-test"
WINDOW = 36_000  # tokens: the loop reaches 95% of it (~136 KB of history) well past the checkpoint size
PAGE = "x" * 1500
TOOL: Any = {
    "type": "function",
    "function": {"name": "read_page", "parameters": {"type": "object", "properties": {"page": {"type": "integer"}}}},
}


def next_page(received: Received) -> Reply:
    """The model reads the next page each time (its arguments differ: nothing loops)."""
    step = sum(1 for m in received.json()["messages"] if m["role"] == "tool")
    call = (f"call_{step}", "read_page", orjson.dumps({"page": step}).decode())
    return Reply.json(payloads.chat_completion(tool_calls=[call], usage=(10, 5), model=MODEL))


async def run_loop(proxy_url: str) -> list[str | None]:
    """The agent loop until the proxy stops it: each step's `x-runguard-warning` header, then why it stopped."""
    client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="sk-test-long", max_retries=0)
    messages: list[Any] = [
        {"role": "system", "content": "You read a book page by page."},
        {"role": "user", "content": "Read the whole book."},
    ]
    warnings: list[str | None] = []
    for _ in range(200):
        try:
            raw = await client.chat.completions.with_raw_response.create(
                model=MODEL, messages=messages, tools=[TOOL], extra_headers={"X-Run-Id": "run-long"}
            )
        except openai.RateLimitError as stopped:  # the proxy's 429 that the SDK does not retry
            warnings.append(f"stopped: {stopped.message}")
            break
        warnings.append(raw.headers.get("x-runguard-warning"))
        message = raw.parse().choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            page = orjson.loads(call.function.arguments)["page"]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"page {page}: {PAGE}"})
    await client.close()
    return warnings


async def metrics_of(proxy_url: str) -> str:
    async with httpx.AsyncClient() as http:
        return (await http.get(proxy_url + "/runguard/metrics")).text


def verdicts(records: list[RequestRecord]) -> list[tuple[int, str | None, tuple[str, ...]]]:
    return [(r.index, r.blocked_by, tuple(v.detector for v in r.verdicts)) for r in records]


async def test_a_long_loop_trips_the_same_read_from_checkpoints_or_whole(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  {MODEL}: {WINDOW}\n")
    upstream = await FakeUpstream(next_page).start()
    outcomes = []
    try:
        for cache_mb in (32, 0):
            sink = ListSink()
            settings = settings_for(
                upstream.url, server={"history_cache_mb": cache_mb}, log={"access_log": False}, models_file=str(models)
            )
            running = await start_proxy(settings, sink=sink)
            try:
                warnings = await run_loop(running.url)
                metrics = await metrics_of(running.url)
            finally:
                await running.stop()
            records = [r for r in sink.records if isinstance(r, RequestRecord)]
            outcomes.append((warnings, verdicts(records), metrics))
    finally:
        await upstream.stop()
    (cached, cached_verdicts, cached_metrics), (whole, whole_verdicts, whole_metrics) = outcomes
    assert cached == whole and cached_verdicts == whole_verdicts
    assert cached_verdicts[-1][1] == "context_window"  # the loop was stopped by the window, not cut short
    assert "context_window" in (cached[-1] or "")
    first_warning = next(i for i, w in enumerate(cached) if w and "context_window" in w)
    assert first_warning < len(cached) - 1  # warned (at 70% of the window) before it stopped (at 95%)
    assert len(upstream.received) == 2 * (len(cached) - 1)  # every request but the stopped one went upstream
    resumed = _counter(cached_metrics, 'runguard_long_requests_total{read="resumed"}')
    assert resumed >= len(cached) // 2  # most of the loop was past the checkpoint size and read from one
    assert "runguard_long_requests_total" not in whole_metrics


def _counter(metrics: str, name: str) -> float:
    line = next(line for line in metrics.splitlines() if line.startswith(name))
    return float(line.rsplit(" ", 1)[1])


STEPS = 30  # with 1.5 KB results a loop passes the 32 KB checkpoint size after about 20 steps


def _pages(received: Received) -> int:
    text = received.body.decode()
    return text.count("page-result")


async def _responses_loop(proxy_url: str) -> None:
    """openai SDK, Responses: each step resends `input` with the last call and its output appended."""
    client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="sk-test-long", max_retries=0)
    items: list[Any] = [{"role": "user", "content": "Read the whole book."}]
    for _ in range(STEPS):
        response = await client.responses.create(
            model="gpt-4o", instructions="You read a book.", input=items, extra_headers={"X-Run-Id": "run-resp"}
        )
        for item in response.output:
            items.append(item.model_dump(exclude_none=True))
            if item.type == "function_call":
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": item.call_id,
                        "output": f"page-result {len(items)} {PAGE}",
                    }
                )
    await client.close()


async def _gemini_loop(proxy_url: str) -> None:
    """google-genai: each step resends `contents` with the model's call and the function response appended."""
    client = genai.Client(api_key="test-gemini-key", http_options=types.HttpOptions(base_url=proxy_url))
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Read the whole book.")])]
    config = types.GenerateContentConfig(system_instruction="You read a book.")
    for _ in range(STEPS):
        result = await client.aio.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)
        assert result.candidates and result.candidates[0].content
        contents.append(result.candidates[0].content)
        contents.append(
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(
                        name="read_page", response={"text": f"page-result {len(contents)} {PAGE}"}
                    )
                ],
            )
        )


def _next_call(received: Received) -> Reply:
    step = _pages(received)
    if received.path.endswith("/responses"):
        calls = [(f"call_{step}", "read_page", orjson.dumps({"page": step}).decode())]
        return Reply.json(payloads.response_object(calls=calls))
    return Reply.json(payloads.gemini_response(calls=[("read_page", {"page": step})]))


@pytest.mark.parametrize("api", ["responses", "gemini"])
async def test_sdk_loops_are_read_from_checkpoints_once_long(api: str) -> None:
    """What the SDKs resend is byte for byte what they sent before, so every long request resumes."""
    upstream = await FakeUpstream(_next_call).start()
    settings = settings_for(upstream.url, log={"access_log": False})
    running = await start_proxy(settings)
    try:
        await (_responses_loop if api == "responses" else _gemini_loop)(running.url)
        metrics = await metrics_of(running.url)
    finally:
        await running.stop()
        await upstream.stop()
    long = sum(1 for r in upstream.received if len(r.body) >= 32 * 1024)
    assert long >= 5
    assert _counter(metrics, 'runguard_long_requests_total{read="whole"}') == 1  # the first long one only
    assert _counter(metrics, 'runguard_long_requests_total{read="resumed"}') == long - 1
