"""Every API's conversation renders faithfully from a recorded body (store.record_bodies): an Anthropic request
with a top-level `system`, a `tool_use` and its `tool_result`, a Responses one and a Gemini one, each sent by
its real SDK through the real proxy to the fake upstream, read back on the run page and by `show --json`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
from google import genai
from google.genai import types

from tests.e2e import payloads
from tests.proxy.cli.views import invoke
from tests.support import anthropic_upstream
from tests.support.dashboard import start_dashboard_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

RUNS = ("t-anthropic", "t-responses", "t-gemini")


def _answers(received: Received) -> Reply:
    if received.path == "/v1/messages":
        return Reply.json(anthropic_upstream.message(anthropic_upstream.Step(text="Flight AF1 is booked.")))
    if received.path == "/v1/responses":
        return Reply.json(payloads.response_object(calls=[("c2", "book_table", '{"seats": 2}')]))
    return Reply.json(payloads.gemini_response(text="It is noon in Paris."))


async def _send(url: str) -> None:
    claude = anthropic.AsyncAnthropic(
        base_url=url, api_key="sk-ant-t", max_retries=0, default_headers={"X-Run-Id": RUNS[0]}
    )
    await claude.messages.create(
        model=anthropic_upstream.MODEL,
        max_tokens=100,
        system="You are a travel agent.",
        tools=[{"name": "search_flights", "input_schema": {"type": "object"}}],
        messages=[
            {"role": "user", "content": "Book me a flight to Paris."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Searching."},
                    {"type": "tool_use", "id": "toolu_1", "name": "search_flights", "input": {"to": "CDG"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 flights found: AF1, AF2, DL7"},
                    {"type": "text", "text": "Take the first."},
                ],
            },
        ],
    )
    gpt = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-t", max_retries=0, default_headers={"X-Run-Id": RUNS[1]})
    await gpt.responses.create(
        model="gpt-4o",
        instructions="You book restaurants.",
        input=[
            {"role": "user", "content": "A table for two, please."},
            {"type": "function_call", "call_id": "c1", "name": "find_restaurant", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "Chez Marie has a table"},
        ],
    )
    await gpt.close()
    await claude.close()
    gemini = genai.Client(api_key="g-t", http_options=types.HttpOptions(base_url=url, headers={"X-Run-Id": RUNS[2]}))
    await gemini.aio.models.generate_content(
        model="gemini-2.5-flash",
        contents=[
            types.Content(role="user", parts=[types.Part.from_text(text="What time is it in Paris?")]),
            types.Content(role="model", parts=[types.Part.from_function_call(name="get_time", args={"city": "Paris"})]),
            types.Content(
                role="user", parts=[types.Part.from_function_response(name="get_time", response={"time": "12:00"})]
            ),
        ],
        config=types.GenerateContentConfig(system_instruction="You tell the time."),
    )


async def _lines(store_url: str, run_id: str) -> dict[str, list[tuple[str, str, str]]]:
    detail = orjson.loads((await invoke("show", run_id, "--json", url=store_url)).stdout)
    (request,) = detail["requests"]
    content: dict[str, Any] = request["content"]
    return {side: [(e["kind"], e["title"], e["text"]) for e in content[side]] for side in ("sent", "answered")}


async def test_anthropic_responses_and_gemini_conversations_render_as_sent(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    store_url = f"sqlite+aiosqlite:///{tmp_path}/transcripts.db"
    upstream.script = _answers
    running = await start_dashboard_proxy(upstream, store_url, upstreams={"anthropic": upstream.url})
    try:
        await _send(running.url)
        async with httpx.AsyncClient(base_url=running.url) as http:
            pages = {}
            for run_id in RUNS:  # the store writes in the background: each page once its body is there
                for _ in range(200):
                    pages[run_id] = (await http.get(f"/runguard/ui/runs/{run_id}")).text
                    if 'class="exchange"' in pages[run_id]:
                        break
                    await asyncio.sleep(0.02)
    finally:
        await running.stop()
    assert "You are a travel agent." in pages[RUNS[0]] and "3 flights found: AF1, AF2, DL7" in pages[RUNS[0]]
    assert "Chez Marie has a table" in pages[RUNS[1]] and "You tell the time." in pages[RUNS[2]]

    assert await _lines(store_url, RUNS[0]) == {
        "sent": [
            ("system", "system", "You are a travel agent."),
            ("tool result", "search_flights", "3 flights found: AF1, AF2, DL7"),
            ("user", "user", "Take the first."),
        ],
        "answered": [("assistant", "assistant", "Flight AF1 is booked.")],
    }
    assert await _lines(store_url, RUNS[1]) == {
        "sent": [
            ("system", "instructions", "You book restaurants."),
            ("tool result", "find_restaurant", "Chez Marie has a table"),
        ],
        "answered": [("tool call", "book_table", '{"seats": 2}')],
    }
    assert await _lines(store_url, RUNS[2]) == {
        "sent": [("system", "system", "You tell the time."), ("tool result", "get_time", '{"time":"12:00"}')],
        "answered": [("assistant", "assistant", "It is noon in Paris.")],
    }
