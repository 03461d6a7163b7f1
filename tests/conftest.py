"""Shared fixtures: a fake upstream and the real proxy in front of it, on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest

from tests.e2e.claude import claude_upstream, make_claude  # noqa: F401 (fixtures: Anthropic's fake beside OpenAI's)
from tests.e2e.vertex import make_vertex  # noqa: F401 (fixture: the proxy with its Vertex AI upstream on the fake)
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream().start()
    yield fake
    await fake.stop()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


ProxyFactory = Callable[..., Any]


@pytest.fixture
async def make_proxy(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[ProxyFactory]:
    """make_proxy(**sections) -> the URL of a real proxy with extra settings (e.g. guard={...}) in front of
    `upstream`, its records in `sink`; every proxy made is stopped after the test."""
    running = []

    async def make(**sections: Any) -> str:
        proxy = await start_proxy(settings_for(upstream.url, **sections), sink=sink)
        running.append(proxy)
        return proxy.url

    yield make
    for proxy in running:
        await proxy.stop()


@pytest.fixture
async def proxy_url(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[str]:
    """The proxy with every default detector, in front of `upstream`."""
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    yield running.url
    await running.stop()


SdkClient = Callable[..., openai.AsyncOpenAI]


@pytest.fixture
async def sdk_client() -> AsyncIterator[SdkClient]:
    """sdk_client(proxy_url, api_key, headers=None) -> the openai SDK's AsyncOpenAI on a proxy, with no
    retries; every client made is closed after the test."""
    clients: list[openai.AsyncOpenAI] = []

    def make(url: str, api_key: str, headers: dict[str, str] | None = None) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=api_key, default_headers=headers, max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()
