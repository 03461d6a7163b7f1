"""What the state's rebuild from the records costs at start: time and memory, SQLite or PostgreSQL.

    python -m bench.rebuild [--runs 100000] [--requests 1000000] [--live 1.0] [--database-url URL]
                            [--state-url redis://...] [--no-fill]

Fills a fresh store with synthetic rows (generated here, no traffic): `--runs` runs over 1,000 keys,
`--live` of them seen within the idle time (an hour), `--requests` requests today spread over those
runs, a blocking trip for one run in a hundred (half of them reset afterwards) and a key breaker
for one key in ten. Then, as `serve` does at start, reads what is live (`store.live.read_live`) and
writes it into a fresh `MemoryState` (`guard.records.rebuild`), and prints:
- seconds reading the records, seconds writing the state, and in all;
- the process's resident memory held after (the rebuilt state and what Python keeps) and its peak
  during the rebuild, over what it had before (MB).
The clock is set to 23:00 UTC of today, so the whole day's requests fall in the day's window.
The default database is a temporary SQLite file; a PostgreSQL URL gets a schema of its own, dropped
after. `--state-url` rebuilds into Redis instead (under a key prefix of its own, deleted after), as a
failover does: every figure read first, then raised (`--no-fill` measures again on a SQLite file).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from sqlalchemy import text

from runguard.config.settings import BreakerSettings
from runguard.proxy.guard.records.rebuild import rebuild
from runguard.proxy.runs.tenants import Tenants
from runguard.proxy.state.base import ScopeTtls, StateBackend
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.state.redis import RedisState
from runguard.proxy.store import make_engine, parse, upgrade
from runguard.proxy.store.live import day_start, read_live
from runguard.proxy.store.models import Request, Reset, Run, Trip

IDLE = 3600.0
KEYS = 1000
CHUNK = 20_000


def _memory() -> tuple[float, float]:
    """Resident and peak resident memory of this process, MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _peak_from_here() -> float:
    """Resident memory now (MB); the peak counts from here on (the fill's rows are not the rebuild's)."""
    Path("/proc/self/clear_refs").write_text("5")
    return _memory()[0]


def _rows(runs: int, requests: int, live: float, now: float) -> dict[Any, list[dict[str, Any]]]:
    rng = random.Random(47)
    run_rows, request_rows, trip_rows, reset_rows = [], [], [], []
    day = now - day_start(now)[1]
    for i in range(runs):
        idle = IDLE * (rng.random() if i < runs * live else 1.5 + rng.random())
        last = now - idle
        run_rows.append(
            dict(
                run_id=f"run-{i}",
                key_hash=f"k_{i % KEYS:016x}",
                first_seen=last - 600,
                last_seen=last,
                agents=1,
                requests=requests // runs,
                input_tokens=9000,
                output_tokens=400,
                cached_tokens=0,
                usd=0.01,
                trips=0,
                warnings=0,
                usd_avoided=0.0,
                exit_reason=None,
                exit_at=None,
            )
        )
        if i % 100 == 0:
            trip_rows.append(
                dict(
                    id=f"t-{i}",
                    run_id=f"run-{i}",
                    key_hash=f"k_{i % KEYS:016x}",
                    detector="max_requests",
                    action="block",
                    reason="cap",
                    scope="run",
                    request_index=10,
                    at=last,
                    usd_so_far=0.01,
                    tokens_so_far=9400,
                    usd_avoided=0.0,
                    evidence={},
                )
            )
            if i % 200 == 0:
                reset_rows.append(dict(id=f"r-{i}", scope="run", target=f"run-{i}", tenant=None, at=last + 1))
    for k in range(0, KEYS, 10):
        trip_rows.append(
            dict(
                id=f"tk-{k}",
                run_id=f"run-{k}",
                key_hash=f"k_{k:016x}",
                detector="budget",
                action="block",
                reason="daily budget",
                scope="key",
                request_index=1,
                at=now - 30,
                usd_so_far=1.0,
                tokens_so_far=1,
                usd_avoided=0.0,
                evidence={},
            )
        )
    for j in range(requests):
        run = j % runs
        request_rows.append(
            dict(
                id=f"q-{j}",
                run_id=f"run-{run}",
                request_index=j // runs + 1,
                at=now - rng.random() * day,
                key_hash=f"k_{run % KEYS:016x}",
                agent="agent",
                model="gpt-4o-mini",
                provider="openai",
                api="chat",
                streamed=False,
                status=200,
                input_tokens=900,
                output_tokens=40,
                cached_tokens=0,
                reasoning_tokens=0,
                usage_estimated=False,
                usd=0.001,
                upstream_ms=300.0,
                overhead_ms=0.2,
                tool_calls=[],
                handoff_to=None,
                finish_reason="stop",
                blocked_by=None,
                error=None,
                verdicts=[],
            )
        )
    return {
        Run.__table__: run_rows,
        Trip.__table__: trip_rows,
        Reset.__table__: reset_rows,
        Request.__table__: request_rows,
    }


async def _fill(url: str, runs: int, requests: int, live: float, now: float) -> float:
    target = parse(url)
    engine = make_engine(target)
    began = time.perf_counter()
    await upgrade(engine, target)
    for table, rows in _rows(runs, requests, live, now).items():
        for start in range(0, len(rows), CHUNK):
            async with engine.begin() as conn:
                await conn.execute(table.insert(), rows[start : start + CHUNK])
    if target.sqlite:
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))
    else:
        async with engine.begin() as conn:
            for table in ("runs", "requests", "trips", "resets"):
                await conn.execute(text(f"ANALYZE {table}"))
    await engine.dispose()
    return time.perf_counter() - began


async def _measure(url: str, now: float, state_url: str | None = None) -> dict[str, float]:
    engine = make_engine(parse(url))
    ttls = ScopeTtls.of_runs(IDLE, 7 * 86400)
    prefix = f"rgbench{secrets.token_hex(4)}"
    state: StateBackend = MemoryState(ttls, max_scopes=1_000_000)
    if state_url is not None:
        state = RedisState.from_url(state_url, key_prefix=prefix, ttls=ttls, timeout=5.0)
    rss0 = _peak_from_here()
    began = time.perf_counter()
    live = await read_live(engine, now, idle_seconds=IDLE, breaker_seconds=900.0)
    read = time.perf_counter() - began
    done = await rebuild(
        state, live, tenants=Tenants({}), latches=lambda _: True, breakers=BreakerSettings(), now=now, fresh=True
    )
    total = time.perf_counter() - began
    del live
    rss, peak = _memory()
    await engine.dispose()
    scopes = len(state) if isinstance(state, MemoryState) else await _drop(state_url or "", prefix)
    await state.close()
    return {
        "read_s": read,
        "write_s": total - read,
        "total_s": total,
        "held_mb": rss - rss0,
        "peak_mb": peak - rss0,
        "runs": done.runs,
        "keys": done.keys,
        "breakers": done.breakers,
        "scopes": scopes,
    }


async def _drop(state_url: str, prefix: str) -> int:
    """Delete the bench's keys from Redis; how many there were."""
    client = aioredis.from_url(state_url)
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=5000)]
    for start in range(0, len(keys), 5000):
        await client.delete(*keys[start : start + 5000])
    await client.aclose()
    return len(keys)


async def main(args: argparse.Namespace) -> None:
    now = day_start(time.time())[1] + 23 * 3600.0
    schema = None
    url = args.database_url
    if url is None:
        url = f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/rebuild.db"
    elif url.startswith("postgresql") and not args.no_fill:
        schema = f"rg_bench_{secrets.token_hex(4)}"
        url = f"{url}{'&' if '?' in url else '?'}schema={schema}"
    try:
        if not args.no_fill:
            filled = await _fill(url, args.runs, args.requests, args.live, now)
            print(f"filled {args.runs:,} runs, {args.requests:,} requests in {filled:.1f} s ({parse(url).describe()})")
        got = await _measure(url, now, args.state_url)
        print(
            f"rebuild: read {got['read_s']:.2f} s + write {got['write_s']:.2f} s = {got['total_s']:.2f} s; "
            f"memory held {got['held_mb']:.0f} MB, peak {got['peak_mb']:.0f} MB; "
            f"{got['runs']:,.0f} live runs, {got['keys']:,.0f} keys, {got['breakers']:,.0f} open breakers, "
            f"{got['scopes']:,.0f} scopes"
        )
    finally:
        if schema is not None and not args.no_fill:
            engine = make_engine(parse(args.database_url))
            async with engine.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            await engine.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--live", type=float, default=1.0, help="share of the runs seen within the idle time")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--state-url", default=None, help="rebuild into this Redis (merging, as after a failover)")
    parser.add_argument("--no-fill", action="store_true", help="measure on a SQLite file --database-url filled before")
    asyncio.run(main(parser.parse_args()))
