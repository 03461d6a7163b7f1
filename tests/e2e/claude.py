"""Claude agents for the end-to-end tests: the anthropic SDK on the proxy, and hand-written tool loops.

Two fake upstreams sit behind the proxy: `openai` (also Gemini's) and
`claude` (Anthropic's), so a test can prove which one a request reached.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import pytest

from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream

MODEL = "claude-haiku-4-5"
KEY = "sk-ant-api03-e2e-key"
Tool = Callable[[str, dict[str, Any]], str]


@dataclass
class Claude:
    """A proxy in front of both fakes; `url` is its base URL (`http://HOST:PORT`)."""

    url: str
    openai: FakeUpstream
    claude: FakeUpstream
    sink: ListSink


ClaudeFactory = Callable[..., Any]


@pytest.fixture
async def claude_upstream() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def make_claude(
    upstream: FakeUpstream, claude_upstream: FakeUpstream, sink: ListSink
) -> AsyncIterator[ClaudeFactory]:
    """make_claude(**sections) -> a `Claude`: the real proxy with `upstreams.anthropic` on `claude_upstream`
    and OpenAI/Gemini on `upstream`; every proxy made is stopped after the test."""
    running = []

    async def make(**sections: Any) -> Claude:
        upstreams = {"anthropic": claude_upstream.url, **sections.pop("upstreams", {})}
        proxy = await start_proxy(settings_for(upstream.url, upstreams=upstreams, **sections), sink=sink)
        running.append(proxy)
        return Claude(proxy.url, upstream, claude_upstream, sink)

    yield make
    for proxy in running:
        await proxy.stop()


class Sent:
    """Every request a client sent (retries included), by an httpx2 event hook."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def hooks(self) -> dict[str, list[Any]]:
        return {"request": [self.requests.append]}

    def async_hooks(self) -> dict[str, list[Any]]:
        async def seen(request: httpx2.Request) -> None:
            self.requests.append(request)

        return {"request": [seen]}


def client(base_url: str, run: str | None = None, sent: Sent | None = None, **kwargs: Any) -> anthropic.AsyncAnthropic:
    """The async SDK on the proxy with its default retries (2), counting what it sends."""
    headers = {**({"X-Run-Id": run} if run else {}), **kwargs.pop("default_headers", {})}
    http = httpx2.AsyncClient(event_hooks=sent.async_hooks() if sent else {})
    kwargs.setdefault("api_key", KEY)
    return anthropic.AsyncAnthropic(base_url=base_url, default_headers=headers, http_client=http, **kwargs)


def sync_client(base_url: str, run: str | None = None, sent: Sent | None = None, **kwargs: Any) -> anthropic.Anthropic:
    headers = {**({"X-Run-Id": run} if run else {}), **kwargs.pop("default_headers", {})}
    http = httpx2.Client(event_hooks=sent.hooks() if sent else {})
    kwargs.setdefault("api_key", KEY)
    return anthropic.Anthropic(base_url=base_url, default_headers=headers, http_client=http, **kwargs)


SEARCH_TOOL: Any = {
    "name": "search",
    "description": "Search the invoice archive",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}


async def tool_loop(
    sdk: anthropic.AsyncAnthropic, tool: Tool, *, stream: bool = False, steps: int = 20, model: str = MODEL
) -> str:
    """A hand-written agent loop: ask, run every tool call, send the results back, until a text answer."""
    messages: list[Any] = [{"role": "user", "content": "Find the total of invoice INV-7."}]
    for _ in range(steps):
        if stream:
            async with sdk.messages.stream(
                model=model, max_tokens=512, messages=messages, tools=[SEARCH_TOOL]
            ) as events:
                message = await events.get_final_message()
        else:
            message = await sdk.messages.create(model=model, max_tokens=512, messages=messages, tools=[SEARCH_TOOL])
        calls = [block for block in message.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in message.content if block.type == "text")
        messages.append({"role": "assistant", "content": [block.model_dump() for block in message.content]})
        results = [
            {"type": "tool_result", "tool_use_id": call.id, "content": tool(call.name, dict(call.input))}  # type: ignore[arg-type]
            for call in calls
        ]
        messages.append({"role": "user", "content": results})
    return "gave up"


def soft_error(name: str, args: dict[str, Any]) -> str:
    """A tool stuck in a soft failure: the same answer whatever it is asked."""
    return '{"status": "archive_unavailable", "data": null}'


def progressing(name: str, args: dict[str, Any]) -> str:
    """A tool whose answer is new each time."""
    return f'{{"status": "ok", "hits": ["{args.get("query")}"]}}'
