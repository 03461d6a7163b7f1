"""A loopback OTLP collector for the telemetry tests that export through a real proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.otel import collecting
from tests.support.otlp_receiver import OtlpReceiver


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    async with collecting() as collector:
        yield collector
