"""What Redis state costs a guarded request over in-memory state, in-process: us, CPU-us and round trips.

    python -m bench.redis_ops [--url redis://127.0.0.1:6379/0] [--api chat|responses|gemini]
                              [--requests 1000] [--repeat 3] [--roots]

Runs the guard's part of a request (`bench.pipeline`'s loop: parse, admit,
response, inspect, complete; every detector, the bench's limits, no store)
`--requests` times, each request its own run, once over a `MemoryState` and
once over a `RedisState` on `--url` (its keys under a prefix of their own,
deleted at the end). Prints per request: wall microseconds, CPU microseconds
of this process (`time.process_time`: the encoding, the Lua call, redis-py's
packing and parsing; not the Redis server's), and Redis commands sent (round
trips: one command is one round trip, as RunGuard sends no pipelines), by
command. The difference of the two rows is what Redis adds (issue #39: at most
0.3 ms and 0.3 CPU-ms). `--roots`: requests without `X-Run-Id`, so each run
is found by its conversation's root (the identity lookups: `recall`, `claim`).
Sequential requests on an idle loop: the floor; under load the round trips
also wait behind other requests.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import time
import uuid
from typing import Any

from bench.payloads import APIS, Api, scenario_request
from bench.pipeline import guard_for
from bench.replies import body as reply_body
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.providers.routes import resolve
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state.base import ScopeTtls
from runguard.proxy.state.redis import RedisState

PATHS = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "gemini": "/v1beta/models/gemini-2.5-flash:generateContent",
}


class Counter:
    """Counts the commands a `RedisState` sends, by name: those through its redis-py client
    (`execute_command`) and, where it has them, those on its own connections (`_calls.send`)."""

    def __init__(self, state: RedisState) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._wrap(state._client, "execute_command")
        calls = getattr(state, "_calls", None)
        if calls is not None:
            self._wrap(calls, "send")

    def _wrap(self, owner: Any, method: str) -> None:
        send = getattr(owner, method)

        async def counted(*args: Any, **options: Any) -> Any:
            self.counts[str(args[0]).upper()] += 1
            return await send(*args, **options)

        setattr(owner, method, counted)


_conversations = iter(range(10**12))  # a new root per request over every round (see `_round`)


async def _round(state: Any, api: Api, requests: int, roots: bool, tag: str) -> tuple[float, float]:
    """Wall and CPU seconds for `requests` requests through a guard over `state`."""
    guard = guard_for(None, state=state)
    route = resolve(PATHS[api])
    assert route is not None
    hasher = KeyHasher(b"bench-salt-bench-salt")
    template = scenario_request(api, False, "small")
    reply = reply_body(api, 1, None)
    wall = cpu = 0.0
    for i in range(requests):
        adapter = adapter_for(route.api)
        assert adapter is not None
        # A new conversation root per request when runs are found by their root: each its own run.
        body = (
            template.replace(b"NONCE_000000000000", f"NONCE_{next(_conversations):012d}".encode(), 1)
            if roots
            else template
        )
        w0, c0 = time.perf_counter(), time.process_time()
        key_hash = hasher.hash("sk-bench-0123456789abcdef")
        info = adapter.parse_request(body, RequestContext(route.model, None, False))
        header_run = None if roots else f"{tag}-run-{i}"
        ticket = await guard.admit(adapter, info, body=body, key_hash=key_hash, header_run=header_run)
        assert ticket.answer is None, ticket.blocked_by
        seen = guard.response_seen(ticket, adapter.parse_response(reply), 200, 0.001)
        guard.inspect(ticket, seen)
        await guard.complete(ticket, seen, client_status=200)
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
    return wall, cpu


async def _redis(url: str, prefix: str) -> RedisState:
    return RedisState.from_url(url, key_prefix=prefix, ttls=ScopeTtls(), timeout=2.0)


async def _drop(state: RedisState, prefix: str) -> None:
    client = state._client  # the bench's own keys, deleted
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
    for start in range(0, len(keys), 500):
        await client.delete(*keys[start : start + 500])


async def measure(url: str, api: Api, requests: int, repeat: int, roots: bool) -> None:
    label = "roots" if roots else "X-Run-Id"
    print(f"{api} small, runs by {label}: per request, median of {repeat} rounds of {requests}")
    print(f"{'state':8}{'us':>10}{'CPU us':>10}{'commands':>10}  by command")
    memory_rows = []
    for n in range(repeat):
        wall, cpu = await _round(None, api, requests, roots, f"mem-{n}-{uuid.uuid4().hex[:6]}")
        memory_rows.append((wall, cpu))
    mem_wall = statistics.median(w for w, _ in memory_rows) / requests * 1e6
    mem_cpu = statistics.median(c for _, c in memory_rows) / requests * 1e6
    print(f"{'memory':8}{mem_wall:10.1f}{mem_cpu:10.1f}{0:10.2f}")
    prefix = f"rg-bench-{uuid.uuid4().hex[:8]}"
    state = await _redis(url, prefix)
    try:
        await state.ping()
        counter = Counter(state)
        await _round(state, api, min(requests, 100), roots, f"warm-{prefix}")  # connections, script cache
        counter.counts.clear()
        rows = [await _round(state, api, requests, roots, f"{prefix}-{n}") for n in range(repeat)]
        wall = statistics.median(w for w, _ in rows) / requests * 1e6
        cpu = statistics.median(c for _, c in rows) / requests * 1e6
        sent = sum(counter.counts.values()) / (requests * repeat)
        by = ", ".join(f"{name} {count / (requests * repeat):.2f}" for name, count in counter.counts.most_common())
        print(f"{'redis':8}{wall:10.1f}{cpu:10.1f}{sent:10.2f}  {by}")
        print(f"{'+redis':8}{wall - mem_wall:10.1f}{cpu - mem_cpu:10.1f}")
    finally:
        await _drop(state, prefix)
        await state.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--api", choices=(*APIS, "all"), default="chat")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--roots", action="store_true", help="runs found by their root, not by X-Run-Id")
    args = parser.parse_args(argv)
    apis: tuple[Api, ...] = APIS if args.api == "all" else (args.api,)
    for api in apis:
        asyncio.run(measure(args.url, api, args.requests, args.repeat, args.roots))


if __name__ == "__main__":
    main()
