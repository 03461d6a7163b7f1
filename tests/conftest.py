"""Shared fixtures: a fake upstream and the real proxy in front of it, on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

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


@pytest.fixture
async def proxy_url(upstream: FakeUpstream, sink: ListSink) -> AsyncIterator[str]:
    """The proxy with every default detector, in front of `upstream`."""
    running = await start_proxy(settings_for(upstream.url), sink=sink)
    yield running.url
    await running.stop()
