"""What each dashboard page costs with a large store: fill it, serve it, time every page.

    python -m bench.ui_pages [--runs 100000] [--database-url URL] [--repeat 5]

Fills a fresh store (a temporary SQLite file by default; a PostgreSQL URL
with `?schema=NAME` gets that schema, dropped afterwards) with `--runs` runs
over the last 30 days: 3 requests each on average (one run in 1,000 has 200),
5 API keys, 4 models, a trip in one run of 10 and a warning in one of 20,
a few hundred runs live. The rows go in with plain bulk inserts (the proxy's
writer would take minutes for this many). Then the real proxy app is started
on loopback with that store and each page is fetched `--repeat` times; the
median and the slowest time per page are printed (milliseconds, wall time of
the HTTP request, server and client on this machine), and the first load's
(cold: the dashboard has yet to read the sums of the days that have ended).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert, text

from runguard.config.settings import Settings
from runguard.proxy.serve.app import create_app
from runguard.proxy.serve.server import start
from runguard.proxy.store import make_engine, parse, upgrade
from runguard.proxy.store.models import Request, Run, RunAgent, Trip

DAY = 86400.0
KEYS = [f"k_{i:016x}" for i in range(5)]
MODELS = ["gpt-4o-mini", "gpt-4o", "gemini-2.5-flash", "gpt-4.1"]
AGENTS = ["planner", "researcher", "writer", "reviewer"]
CHUNK = 5000


def _rows(runs: int, now: float, rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = {"runs": [], "run_agents": [], "requests": [], "trips": []}
    for n in range(runs):
        run_id = f"bench-run-{n:06d}"
        live = n >= runs - 300
        start = now - rng.random() * 30 * DAY if not live else now - rng.random() * 600
        steps = 200 if n % 1000 == 7 else rng.randint(1, 5)
        key, model = KEYS[n % len(KEYS)], MODELS[n % len(MODELS)]
        usd = 0.0
        agents = AGENTS[: 1 + n % 3]
        for i in range(1, steps + 1):
            cost = rng.random() * 0.01
            usd += cost
            tables["requests"].append({
                "id": f"b{n}-{i}", "run_id": run_id, "request_index": i, "at": start + i * 2.0, "key_hash": key,
                "agent": agents[i % len(agents)], "model": model, "provider": "openai", "api": "chat",
                "streamed": False, "status": 200, "input_tokens": 1000 * i, "output_tokens": 200,
                "cached_tokens": 0, "reasoning_tokens": 0, "usage_estimated": False, "usd": cost,
                "upstream_ms": 800.0, "overhead_ms": 0.3, "tool_calls": ["search"] if i < steps else [],
                "handoff_to": None, "finish_reason": "tool_calls" if i < steps else "stop", "blocked_by": None,
                "error": None, "verdicts": [],
            })  # fmt: skip
        tripped = n % 10 == 3
        for index, agent in enumerate(agents):
            tables["run_agents"].append({"run_id": run_id, "agent": agent, "first_seen": start + index})
        if tripped or n % 20 == 5:
            detector = ("non_progress", "spiral", "handoff_cycle", "budget")[n % 4]
            tables["trips"].append({
                "id": f"t{n}", "run_id": run_id, "key_hash": key, "detector": detector,
                "action": "block" if tripped else "warn", "reason": "bench", "scope": "run", "request_index": steps,
                "at": start + steps * 2.0, "usd_so_far": usd, "tokens_so_far": 1200 * steps,
                "usd_avoided": usd / steps * max(100 - steps, 0) if tripped else 0.0,
                "evidence": {"tool": "search", "series": [1000, 2000, 3000]},
            })  # fmt: skip
        end = start + steps * 2.0
        tables["runs"].append({
            "run_id": run_id, "key_hash": key, "first_seen": start, "last_seen": end, "agents": len(agents),
            "requests": steps, "input_tokens": 1000 * steps * (steps + 1) // 2, "output_tokens": 200 * steps,
            "cached_tokens": 0, "usd": usd, "trips": int(tripped), "warnings": int(n % 20 == 5),
            "usd_avoided": tables["trips"][-1]["usd_avoided"] if tripped else 0.0,
            "exit_reason": None if live else ("tripped:x" if tripped else "completed"),
            "exit_at": None if live else end,
        })  # fmt: skip
    return tables


async def fill(url: str, runs: int, now: float) -> float:
    """Create the schema and insert the rows; seconds it took."""
    began = time.perf_counter()
    target = parse(url)
    engine = make_engine(target)
    try:
        await upgrade(engine, target)
        tables = _rows(runs, now, random.Random(7))
        for model, rows in ((Run, tables["runs"]), (RunAgent, tables["run_agents"]),
                            (Request, tables["requests"]), (Trip, tables["trips"])):  # fmt: skip
            for offset in range(0, len(rows), CHUNK):
                async with engine.begin() as conn:
                    await conn.execute(insert(model), rows[offset : offset + CHUNK])
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))
    finally:
        await engine.dispose()
    return time.perf_counter() - began


PAGES = (
    "/runguard/ui/",
    "/runguard/ui/runs",
    "/runguard/ui/runs?page=200",
    "/runguard/ui/runs?status=tripped",
    "/runguard/ui/runs?status=running",
    f"/runguard/ui/runs?key={KEYS[2]}&since=7d",
    "/runguard/ui/runs?detector=spiral",
    "/runguard/ui/runs/bench-run-000123",
    "/runguard/ui/runs/bench-run-001007",
    "/runguard/ui/trips",
    "/runguard/ui/keys",
    "/runguard/ui/detectors",
)


async def time_pages(url: str, repeat: int) -> list[tuple[str, float, float, float]]:
    settings = Settings.model_validate(
        {"store": {"database_url": url}, "runs": {"key_salt": "bench"}, "log": {"access_log": False}}
    )
    running = await start(create_app(settings), "127.0.0.1", 0, grace=1.0)
    results = []
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=60) as http:
            for path in PAGES:
                began = time.perf_counter()
                first = await http.get(path)  # cold: imports, the dashboard's sums of ended days, the page cache
                cold = (time.perf_counter() - began) * 1000
                assert first.status_code == 200, (path, first.status_code, first.text[:300])
                times = []
                for _ in range(repeat):
                    began = time.perf_counter()
                    (await http.get(path)).raise_for_status()
                    times.append((time.perf_counter() - began) * 1000)
                results.append((path, cold, statistics.median(times), max(times)))
    finally:
        await running.stop()
    return results


async def main(runs: int, url: str | None, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = url or f"sqlite+aiosqlite:///{Path(tmp) / 'ui-bench.db'}"
        seconds = await fill(url, runs, time.time())
        print(f"filled {runs} runs into {parse(url).describe()} in {seconds:.1f} s")
        try:
            print(f"{'page':50s} {'first':>8s} {'median':>8s} {'max':>8s}  (ms)")
            for path, cold, median, slowest in await time_pages(url, repeat):
                print(f"{path:50s} {cold:8.1f} {median:8.1f} {slowest:8.1f}")
        finally:
            schema = parse(url).schema
            if schema:
                engine = make_engine(parse(url))
                async with engine.begin() as conn:
                    await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                await engine.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.database_url, args.repeat))
