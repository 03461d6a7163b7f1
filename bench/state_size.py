"""Per-run state size along the growth run: the proxy in-process with a `MemoryState` we can look into.

    python -m bench.state_size --upstream http://127.0.0.1:PORT [--api chat] [--steps 300]

Runs the growth scenario (one X-Run-Id, one tool turn more per request)
through `create_app(settings, state=MemoryState(...))` on loopback and, every
few requests, measures what the state backend holds: per scope kind, the
number of scopes and fields, the deep `sys.getsizeof` size, and the size of
the fields serialized as JSON (about what Redis would hold). The Cost rule says
the run's state is bounded whatever the conversation length: flat is the goal.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

import aiohttp
import orjson

from bench import payloads, proxy_setup, serving
from bench.payloads import Api


def deep_size(value: object, seen: set[int] | None = None) -> int:
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        size += sum(deep_size(item, seen) for item in value)
    return size


def measure(state: Any) -> dict[str, Any]:
    """What a `MemoryState` holds, by scope kind (its internals: `_slots`, `_plain`)."""
    kinds: dict[str, dict[str, int]] = {}
    for name, fields in state._slots.items():
        kind = name.partition(":")[0]
        entry = kinds.setdefault(kind, {"scopes": 0, "fields": 0, "bytes": 0, "json_bytes": 0})
        entry["scopes"] += 1
        entry["fields"] += len(fields)
        entry["bytes"] += deep_size(fields)
        entry["json_bytes"] += len(orjson.dumps(fields))
    plain = state._plain
    kinds["plain"] = {
        "scopes": len(plain),
        "fields": len(plain),
        "bytes": deep_size(dict(plain)),
        "json_bytes": len(orjson.dumps({k: v[1] for k, v in plain.items()})),
    }
    return kinds


async def growth(upstream: str, api: Api, steps: int, stream: bool, every: int) -> dict[str, Any]:
    from runguard.proxy.serve.app import create_app
    from runguard.proxy.serve.server import start
    from runguard.proxy.state.base import ScopeTtls
    from runguard.proxy.state.memory import MemoryState

    settings = proxy_setup.settings(upstream)
    state = MemoryState(ttls=ScopeTtls(run=settings.runs.idle_seconds), max_scopes=settings.runs.max_runs)
    running = await start(create_app(settings, state=state), "127.0.0.1", 0, grace=1.0)
    url = running.url + payloads.request_path(api, stream)
    rows: list[dict[str, Any]] = []
    statuses: dict[str, int] = {}
    trips: dict[str, int] = {}
    try:
        async with aiohttp.ClientSession() as session:
            for step in range(steps):
                body = payloads.conversation_request(api, step, stream)
                headers = {
                    **payloads.request_headers(api),
                    "X-Run-Id": f"state-size-{api}",
                    "x-bench-variant": str(step),
                }
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    statuses[str(response.status)] = statuses.get(str(response.status), 0) + 1
                    trip = response.headers.get("x-runguard-trip")
                    if trip:
                        trips[trip] = trips.get(trip, 0) + 1
                await asyncio.sleep(0.005)  # the guard finishes the request after the client has it
                if step % every == 0 or step == steps - 1:
                    rows.append({"step": step, "body_bytes": len(body), "state": measure(state)})
    finally:
        await running.stop()
    return {"api": api, "stream": stream, "steps": rows, "statuses": statuses, "trips": trips}


def main() -> None:
    parser = argparse.ArgumentParser(description="Per-run state size along the growth run (in-process).")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--api", choices=payloads.APIS, default="chat")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    result: dict[str, Any] = {}

    async def go() -> None:
        result.update(await growth(args.upstream, args.api, args.steps, args.stream, args.every))

    serving.run(go)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
