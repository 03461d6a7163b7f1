"""CPU the record store costs per request: `QueueSink` writing request records to SQLite (or PostgreSQL).

    python -m bench.store [--records 20000] [--runs-of 1] [--database-url URL]

Submits records shaped like the latency scenario's (one tool call, one
agent; `--runs-of 4` puts four requests in each run) in chunks of 100 with a
yield in between, as a busy proxy would (or `--rate N` a second, as a proxy
under steady load), then flushes. Prints the process CPU
(all threads: the SQLite writer has its own) per record and records per second
of wall time, next to the CPU of building the same records only and of the
submitting loop alone (its sleeps: what is left is the store's).
The default database is a temporary SQLite file.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from runguard.proxy.store import QueueSink
from runguard.proxy.store.records import RequestRecord


def _record(i: int, runs_of: int) -> RequestRecord:
    return RequestRecord(
        run_id=f"bench-run-{i // runs_of}",
        key_hash="k_0123456789abcdef",
        index=i % runs_of + 1,
        at=1_800_000_000.0 + i * 0.001,
        agent="agent-3f2a9c1b",
        model="gpt-4.1-mini",
        provider="openai",
        api="chat",
        streamed=False,
        status=200,
        input_tokens=812,
        output_tokens=41,
        usd=0.000391,
        upstream_ms=0.4,
        overhead_ms=0.7,
        tool_calls=("search_web",),
        finish_reason="tool_calls",
    )


def _chunk(records: int, rate: float) -> int:
    return max(1, int(rate / 100)) if rate else 100  # at a rate: 100 chunks a second


async def loop_floor(records: int, rate: float) -> float:
    """CPU us per record of the submitting loop alone (its sleeps and wake-ups), with no sink."""
    chunk = _chunk(records, rate)
    cpu = time.process_time()
    for _ in range(0, records, chunk):
        await asyncio.sleep(0.01 if rate else 0)
    return (time.process_time() - cpu) / records * 1e6


async def measure(url: str, records: int, runs_of: int, rate: float = 0.0) -> tuple[float, float, float]:
    """(CPU us per record written, records per wall second, CPU us per record built only)."""
    started = time.process_time()
    built = [_record(i, runs_of) for i in range(records)]
    build_us = (time.process_time() - started) / records * 1e6
    sink = QueueSink(url, queue_size=records + 1)
    sink.start()
    await sink.migrated.wait()
    cpu, wall = time.process_time(), time.perf_counter()
    chunk = _chunk(records, rate)
    for start in range(0, records, chunk):
        for record in built[start : start + chunk]:
            sink.submit(record)
        await asyncio.sleep(0.01 if rate else 0)
    await sink.flush()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert sink.written == records, (sink.written, records)
    await sink.close()
    return cpu / records * 1e6, records / wall, build_us


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--runs-of", type=int, default=1, help="requests per run (1: every record a new run)")
    parser.add_argument("--database-url", help="default: a temporary SQLite file")
    parser.add_argument("--rate", type=float, default=0.0, help="records per second (default: as fast as it goes)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="runguard-bench-store-") as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'store.db'}"
        per_record, rate, build = asyncio.run(measure(url, args.records, args.runs_of, args.rate))
    floor = asyncio.run(loop_floor(args.records, args.rate))
    print(
        f"{args.records} records, {args.runs_of} per run: {per_record:.1f} CPU us per record written "
        f"({rate:,.0f} records/s); building the record alone {build:.1f} us; "
        f"the submitting loop alone {floor:.1f} us, so the store {per_record - floor:.1f} us"
    )


if __name__ == "__main__":
    main()
