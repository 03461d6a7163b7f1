"""Run, key and breaker state in Redis, shared by every replica.

Each scope instance is one hash, `{prefix}:{<scope>:<id>}`. A batch is one
call of a small op interpreter (`batch.lua`) with the keys of every scope it
touches (a request's batches touch three or four): its ops run atomically and
in order, and the scopes' TTLs are refreshed. One call per batch, not one per
scope in a pipeline: redis-py spends some 70 us of CPU on each command it packs
and parses, more than this module spends on a whole batch (a four-scope batch
of 24 ops: 290 us of client CPU as one call, 500 us as four). The keys of a
batch must therefore be on one server: RunGuard talks to one Redis server (or a
primary), not to a Redis Cluster whose slots would split them. (The braces are
a hash tag all the same, so one scope's key always maps to one slot.)

A field's stored form carries its type (see `batch.lua`), so a value reads
back exactly as `MemoryState` gives it: numbers as float, windows as tuples.

Failures (Redis down, restarting, slow) raise `StateUnavailable` within about
one `timeout`: connecting and reading are bounded by it, a broken connection
is retried once at once (the usual case after a restart is a pooled socket
the server closed), and later calls reconnect by themselves. A restart also
empties Redis' script cache; NOSCRIPT (the script did not run) reloads it
and runs the batch again.

A retry cannot count twice. The connection may break after the batch ran and
before its reply arrived; the call is then sent again, word for word. So each
batch names a marker key of its own (random, expiring after `once_ttl`) and
the script keeps its reply there. A batch that finds its marker has run: it
answers with the reply it gave and changes nothing.

A batch whose reply never came (a timeout, or a connection that broke again
on the retry) may or may not have run. The caller gets `StateUnavailable`
within its timeout as for any failure, and the batch is sent again in the
background, under its marker, until it answers: it has then run exactly once,
and `StateUnavailable.pending` gives its results (so the guard can give back
what the batch took, such as an in-flight slot, for a request it let through
unguarded). Sending stops at half the marker's life, so that no copy reaches
the server after the marker is gone; the pause between sends doubles, and at
most `max_connections` batches are being sent again at once, so an outage is
not met with a storm of them.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
from collections.abc import Sequence
from importlib.resources import files
from typing import Any, cast

import orjson
from redis import exceptions as rexc
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ConstantBackoff

from runguard.proxy.core.errors import StateUnavailable
from runguard.proxy.core.ops import Add, CompareAndSet, Get, Op, OpResult, Push, Put, PutNX, Raise, Scope
from runguard.proxy.core.tasks import hold
from runguard.proxy.state.base import ScopeIds, ScopeTtls

__all__ = ["RedisState"]

_STRING, _WINDOW = ord("s"), ord("w")
# What a server that is down, restarting or overloaded raises; a script error (a bug) is a ResponseError too.
_FAILURES = (rexc.RedisError, OSError)
# The failures after which a batch may have run all the same: its reply, not the call, was lost.
_REPLY_LOST = (rexc.ConnectionError, rexc.TimeoutError, OSError)
SETTLE_PAUSE = 0.1  # seconds before the first new send of a batch whose reply was lost; doubled after each


def _glob_literal(text: str) -> str:
    """`text` as a Redis glob pattern that matches it alone (SCAN MATCH)."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def _millis(seconds: float) -> int:
    """A TTL as Redis takes it: whole milliseconds, at least one."""
    return max(1, round(seconds * 1000))


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
        case Raise(field=field, value=value):  # last: only a rebuild sends it, never a request
            args += ("r", field, repr(float(value)))
        case _:
            raise TypeError(f"unknown state op {op!r}")


class RedisState:
    """`StateBackend` on one Redis server (or any endpoint speaking its protocol).

    The client must not decode responses: replies are read as bytes (hence the casts).
    """

    never_waits = False

    def __init__(
        self,
        client: Redis,
        *,
        key_prefix: str,
        ttls: ScopeTtls | None = None,
        once_ttl: float = 5.0,
        max_settling: int = 64,
    ) -> None:
        """`once_ttl`: seconds a batch's marker lives; longer than a call and its retry take.
        `max_settling`: batches whose reply was lost sent again at once, at most (during an outage
        most calls fail: past this many, a failed batch's outcome is left unknown rather than
        adding to the load on a server that is struggling).
        """
        self._client = client
        self._prefix = key_prefix
        ttls = ttls or ScopeTtls()
        self._ttl_ms = {scope: _millis(ttls.of(scope)) for scope in Scope}
        self._once_ttl = once_ttl
        self._once_ms = _millis(once_ttl)
        self._settling: set[asyncio.Task[list[OpResult] | None]] = set()
        self._max_settling = max_settling
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
        client = Redis.from_pool(pool)  # the client owns the pool: closed with it
        # A call and its retry each take at most about `timeout` to connect and as long to read.
        return cls(
            client, key_prefix=key_prefix, ttls=ttls, once_ttl=max(5.0, 4 * timeout), max_settling=max_connections
        )

    @classmethod
    def from_sentinels(
        cls,
        sentinels: Sequence[tuple[str, int]],
        service: str,
        *,
        key_prefix: str,
        ttls: ScopeTtls,
        timeout: float,
        max_connections: int = 64,
        db: int = 0,
        password: str | None = None,
    ) -> RedisState:
        """A client of the primary that Redis Sentinel names for `service` (redis-py's own Sentinel client):
        it asks the sentinels where the primary is before each new connection, and drops its connections when
        the primary it reached answers as a replica (a failover), so the next call reaches the new primary.
        Timeouts as in `from_url`; at most `max_connections` are open (a call past them fails at once)."""
        from redis.asyncio.sentinel import Sentinel

        bounds: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
        sentinel = Sentinel(list(sentinels), sentinel_kwargs=bounds, **bounds)
        client = sentinel.master_for(
            service,
            redis_class=Redis,
            db=db,
            password=password,
            max_connections=max_connections,
            retry=Retry(ConstantBackoff(0.0), retries=1, supported_errors=(rexc.ConnectionError,)),
            health_check_interval=0,
        )
        return cls(
            client, key_prefix=key_prefix, ttls=ttls, once_ttl=max(5.0, 4 * timeout), max_settling=max_connections
        )

    async def server_id(self) -> str:
        """The run id of the Redis server answering now: another one after a failover or a restart
        (`generation`)."""
        try:
            info = await self._client.info("server")
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc
        return str(info.get("run_id", ""))

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
        slots: dict[Scope, int] = {}  # scope -> the number of its key in the call (1-based, as Lua counts)
        args: list[str | int] = []  # the ops; the keys' TTLs go in front once the scopes are known
        for op in ops:
            slot = slots.get(op.scope)
            if slot is None:
                slot = slots[op.scope] = len(slots) + 1
            args.append(slot)
            _encode(op, args)
        keys = [self.key(scope, ids.of(scope)) for scope in slots]
        keys.append(f"{keys[0]}:once:{os.urandom(8).hex()}")  # the first key's hash tag: the same slot
        args[:0] = [*(self._ttl_ms[scope] for scope in slots), self._once_ms]
        payload = orjson.dumps(args)
        sent = time.monotonic()
        try:
            reply = await self._run_script(keys, payload)
        except _REPLY_LOST as exc:
            pending = self._settle(keys, payload, until=sent + self._once_ttl / 2)
            raise StateUnavailable(f"redis: {exc}", pending) from exc
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc
        return [_decode(raw) for raw in reply]

    async def _run_script(self, keys: list[str], args: bytes) -> list[bytes | None]:
        """The script's reply: one stored form per op. A lost script cache (a restart) is refilled once."""
        try:
            reply = await self._client.evalsha(self._sha, len(keys), *keys, args)
        except rexc.NoScriptError:
            await self._client.script_load(self._script)
            reply = await self._client.evalsha(self._sha, len(keys), *keys, args)
        except rexc.ReadOnlyError:
            # The server answers as a replica: a managed endpoint's primary changed role. Its pooled connections
            # are dropped so the next call connects anew, to whatever primary the endpoint names then.
            await self._client.connection_pool.disconnect()
            raise
        return cast(list[bytes | None], reply)

    def _settle(self, keys: list[str], args: bytes, until: float) -> asyncio.Task[list[OpResult] | None] | None:
        """Send the batch again in the background (None: too many are being sent already)."""
        if len(self._settling) >= self._max_settling:
            return None
        return hold(self._settling, self._send_until_answered(keys, args, until))

    async def _send_until_answered(self, keys: list[str], args: bytes, until: float) -> list[OpResult] | None:
        """The results of a batch whose reply was lost, sent again under its marker until it answers.

        None when it has not answered by `until` (the server stayed down or slow). The pause
        between sends doubles: a few sends per batch, however long the server is away.
        """
        pause = SETTLE_PAUSE
        while True:
            await asyncio.sleep(pause)
            if time.monotonic() >= until:
                return None
            try:
                reply = await self._run_script(keys, args)
            except _REPLY_LOST:
                pause *= 2
                continue
            except _FAILURES:
                return None  # an error reply: the server answered, with no results to give
            return [_decode(raw) for raw in reply]

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

    async def ids_ending(self, scope: Scope, suffix: str) -> list[str]:
        head = f"{self._prefix}:{{{scope.value}:"
        pattern = f"{_glob_literal(head)}*{_glob_literal(suffix)}}}"
        try:
            found = [raw.decode() async for raw in self._client.scan_iter(match=pattern, count=1000)]
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc
        return [key[len(head) : -1] for key in found if key.startswith(head) and key.endswith(suffix + "}")]

    async def remember(self, name: str, value: str, ttl: float) -> None:
        try:
            await self._client.set(self._plain_key(name), value, px=_millis(ttl))
        except _FAILURES as exc:
            raise StateUnavailable(f"redis: {exc}") from exc

    async def claim(self, name: str, ttl: float, value: str = "1") -> bool:
        try:
            return bool(await self._client.set(self._plain_key(name), value, px=_millis(ttl), nx=True))
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
        """Stop sending the batches still unsettled, then close the connections."""
        for task in self._settling:
            task.cancel()
        await asyncio.gather(*self._settling, return_exceptions=True)
        await self._client.aclose()
