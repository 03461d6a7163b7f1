"""Helpers of the state tests: Redis backends under a key prefix of their own (a redis-server to kill is in
`tests.support.redis_server`).

These are plain functions and context managers, not fixtures, so the test
modules work the same with or without conftest files (`--noconftest`).
"""

from __future__ import annotations

import redis.asyncio as aioredis

from runguard.proxy.state.base import ScopeIds, ScopeTtls
from runguard.proxy.state.redis import RedisState

IDS = ScopeIds(run="run-1", key="key-1", key_model="key-1:gpt-4o-mini", key_day="key-1:2025-01-01")


def redis_state(
    url: str, prefix: str, ttls: ScopeTtls | None = None, timeout: float = 1.0, max_connections: int = 64
) -> RedisState:
    return RedisState.from_url(
        url, key_prefix=prefix, ttls=ttls or ScopeTtls(), timeout=timeout, max_connections=max_connections
    )


async def delete_prefix(url: str, prefix: str) -> None:
    """Delete this test's keys, and only those (never FLUSHDB: other tests share the server)."""
    client = aioredis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


async def prefix_keys(url: str, prefix: str) -> list[bytes]:
    client = aioredis.from_url(url)
    try:
        return sorted([key async for key in client.scan_iter(match=f"{prefix}:*", count=500)])
    finally:
        await client.aclose()
