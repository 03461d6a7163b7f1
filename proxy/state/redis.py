"""Run, key and breaker state in Redis, shared by every replica.

Each scope instance is one hash, `{prefix}:{<scope>:<id>}`: the braces are a
Redis Cluster hash tag, so a scope's key always sits on one slot. A batch is
split by scope and each scope's ops run as one call of a small op interpreter
(`batch.lua`), atomically and in order, which also refreshes the scope's TTL.
All scopes' calls go out in one pipeline: one round trip per batch.

A field's stored form carries its type (see `batch.lua`), so a value reads
back exactly as `MemoryState` gives it: numbers as float, windows as tuples.

Failures (Redis down, restarting, slow) raise `StateUnavailable` within about
one `timeout`: connecting and reading are bounded by it, a broken connection
is retried once at once (the usual case after a restart is a pooled socket
the server closed), and later calls reconnect by themselves. A restart also
empties Redis' script cache; NOSCRIPT reloads the script and re-runs the
scopes that hit it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib.resources import files
from typing import Any, cast

import orjson
from redis import exceptions as rexc
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ConstantBackoff

from runguard.detectors.ops import Add, CompareAndSet, Get, Op, OpResult, Push, Put, PutNX, Scope
from runguard.proxy.errors import StateUnavailable
from runguard.proxy.state.base import ScopeIds, ScopeTtls

__all__ = ["RedisState"]

_STRING, _WINDOW = ord("s"), ord("w")
_Call = tuple[str, int, bytes]  # one scope's script call: key, TTL in ms, its ops as JSON
# What a server that is down, restarting or overloaded raises; a script error (a bug) is a ResponseError too.
_FAILURES = (rexc.RedisError, OSError)


def _decode(raw: bytes | None) -> OpResult:
    """A stored field (see batch.lua) as the value `MemoryState` would give."""
    if raw is None:
        return None
    tag = raw[0]
    if tag == _STRING:
        return raw[1:].decode()
    if tag == _WINDOW:
        return tuple(orjson.loads(memoryview(raw)[1:]))
    return float(raw)


def _encode(op: Op, args: list[str | int]) -> None:
    """Append `op` to a scope's flat op list (the opcodes of batch.lua).

    Amounts go as text (repr round-trips a double exactly, and JSON has no inf).
    """
    match op:
        case Add(field=field, amount=amount):
            args += ("a", field, repr(float(amount)))
        case Push(field=field, items=items, keep=keep, unique=unique, head=head):
            args += ("p", field, keep, unique + 2 * head, len(items))
            args += items
        case Get(field=field):
            args += ("g", field)
        case Put(field=field, value=None):
            args += ("d", field)
        case Put(field=field, value=str() as value):
            args += ("u", field, value)
        case PutNX(field=field, value=value):
            args += ("x", field, value)
        case CompareAndSet(field=field, expected=None, value=value):
            args += ("n", field, value)
        case CompareAndSet(field=field, expected=str() as expected, value=value):
            args += ("c", field, expected, value)
        case _:
            raise TypeError(f"unknown state op {op!r}")


class RedisState:
    """`StateBackend` on one Redis server (or any endpoint speaking its protocol).

    The client must not decode responses: replies are read as bytes (hence the casts).
    """

    def __init__(self, client: Redis, *, key_prefix: str, ttls: ScopeTtls | None = None) -> None:
        self._client = client
        self._prefix = key_prefix
        ttls = ttls or ScopeTtls()
        self._ttl_ms = {scope: max(1, round(ttls.of(scope) * 1000)) for scope in Scope}
        self._script = files("runguard.proxy.state").joinpath("batch.lua").read_bytes()
        self._sha = hashlib.sha1(self._script, usedforsecurity=False).hexdigest()

    @classmethod
    def from_url(
        cls, url: str, *, key_prefix: str, ttls: ScopeTtls, timeout: float, max_connections: int = 64
    ) -> RedisState:
        """A client whose every connect and read gives up after `timeout` seconds.

        Only a broken connection is retried, once and at once; a timeout is not,
        so one call never waits much longer than `timeout`. At most
        `max_connections` are open: a burst of requests (hundreds of parallel
        calls) waits up to `timeout` for a free one rather than opening a
        connection each, which can exhaust the server's or the host's sockets.
        """
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=timeout,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(ConstantBackoff(0.0), retries=1, supported_errors=(rexc.ConnectionError,)),
            health_check_interval=0,
        )
        return cls(Redis.from_pool(pool), key_prefix=key_prefix, ttls=ttls)  # the client owns the pool: closed with it

    @property
    def script_sha(self) -> str:
        """The SHA1 that EVALSHA names batch.lua by."""
        return self._sha

    def key(self, scope: Scope, scope_id: str) -> str:
        """The Redis key of one scope instance, hash-tagged so it maps to one cluster slot."""
        return f"{self._prefix}:{{{scope.value}:{scope_id}}}"

    def _plain_key(self, name: str) -> str:
        return f"{self._prefix}:kv:{name}"

    async def execute(self, ids: ScopeIds, ops: Sequence[Op]) -> list[OpResult]:
        if not ops:
            return []
        # scope -> (indexes of its ops in `ops`, its ops flattened for batch.lua)
        groups: dict[Scope, tuple[list[int], list[str | int]]] = {}
        for index, op in enumerate(ops):
            group = groups.get(op.scope)
            if group is None:
                group = groups[op.scope] = ([], [])
            group[0].append(index)
            _encode(op, group[1])
        calls = [
            (self.key(scope, ids.of(scope)), self._ttl_ms[scope], orjson.dumps(args))
            for scope, (_, args) in groups.items()
        ]
        replies = await self._run_scripts(calls)
        results: list[OpResult] = [None] * len(ops)
        for (indexes, _), reply in zip(groups.values(), replies, strict=True):
            for index, raw in zip(indexes, reply, strict=True):
                results[index] = _decode(raw)
        return results

    async def _run_scripts(self, calls: list[_Call]) -> list[list[bytes | None]]:
        """Each call's script replies, in one pipeline; a lost script cache is refilled once."""
        try:
            replies = await self._pipeline(calls)
            missing = [i for i, reply in enumerate(replies) if isinstance(reply, rexc.NoScriptError)]
            if missing:
                await self._client.script_load(self._script)
                again = await self._pipeline([calls[i] for i in missing])
                for i, reply in zip(missing, again, strict=True):
                    replies[i] = reply
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc
        for reply in replies:
            if isinstance(reply, Exception):
                raise StateUnavailable(f"redis: {reply}") from reply
        return replies

    async def _pipeline(self, calls: list[_Call]) -> list[Any]:
        """Every call in one round trip, errors in place (NOSCRIPT is one of them)."""
        if len(calls) == 1:  # a pipeline's bookkeeping would cost more than the call itself
            key, ttl_ms, ops = calls[0]
            try:
                return [await self._client.evalsha(self._sha, 1, key, ttl_ms, ops)]
            except rexc.NoScriptError as exc:
                return [exc]
        pipe = self._client.pipeline(transaction=False)
        for key, ttl_ms, ops in calls:
            pipe.evalsha(self._sha, 1, key, ttl_ms, ops)
        return await pipe.execute(raise_on_error=False)

    async def read_scope(self, scope: Scope, scope_id: str) -> dict[str, OpResult]:
        try:
            fields = cast(dict[bytes, bytes], await self._client.hgetall(self.key(scope, scope_id)))
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc
        return {name.decode(): _decode(raw) for name, raw in fields.items()}

    async def clear_scope(self, scope: Scope, scope_id: str) -> bool:
        try:
            return bool(await self._client.delete(self.key(scope, scope_id)))
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc

    async def remember(self, name: str, value: str, ttl: float) -> None:
        try:
            await self._client.set(self._plain_key(name), value, px=max(1, round(ttl * 1000)))
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc

    async def recall(self, name: str) -> str | None:
        try:
            raw = cast(bytes | None, await self._client.get(self._plain_key(name)))
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc
        return None if raw is None else raw.decode()

    async def ping(self) -> bool:
        try:
            return bool(await self._client.ping())
        except _FAILURES:
            return False

    async def close(self) -> None:
        await self._client.aclose()
