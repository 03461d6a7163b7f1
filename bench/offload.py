"""Where judging could run: on the event loop, in a worker thread, or in a worker process. Measured, not guessed.

    python -m bench.offload [--api chat|responses|gemini] [--requests 2000]

Judging a response (parsing it, `response_seen`, `inspect`, `complete` with
every detector, the in-memory state) is timed per request in-process, as
`bench.pipeline` does. Beside it, what handing that work elsewhere costs
before any of it is done:

- a worker thread: `loop.run_in_executor` of a no-op and back (the hand-off
  alone), and how long the loop and a worker thread take to do the same
  amount of Python work each, against one doing it (CPython's GIL: 2x means
  the thread's work was not done beside the loop but in turns with it);
- a worker process: the response bytes (`--api`'s small reply) and a ticket's
  worth of data (2 KB) sent over a pipe to a process that parses the reply and
  sends a small verdict back, per request, round trip.

Figures move with the machine; compare the rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

import orjson

from bench import pipeline
from bench.payloads import APIS, Api
from bench.replies import body as reply_body


def _serve(conn: Connection) -> None:
    """The worker process: parse each reply it is sent and answer with a small verdict."""
    while True:
        message = conn.recv_bytes()
        if not message:
            return
        reply = orjson.loads(message[2048:])
        conn.send_bytes(orjson.dumps({"verdict": None, "keys": len(reply)}))


async def judging_us(api: Api, requests: int) -> float:
    """Microseconds per request of parse_response + inspect + complete with every detector (best of 3)."""
    rounds = [await pipeline.measure(api, "small", requests, 1, bare=False) for _ in range(3)]
    return min(r["parse_response"] + r["inspect"] + r["complete"] for r in rounds)


async def thread_handoff_us(requests: int) -> float:
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(1) as pool:
        await loop.run_in_executor(pool, int)
        began = time.perf_counter()
        for _ in range(requests):
            await loop.run_in_executor(pool, int)
        return (time.perf_counter() - began) / requests * 1e6


def _work(units: int) -> int:
    """A fixed amount of Python work."""
    return sum(sum(range(50)) for _ in range(units))


def _units_per_second() -> float:
    began, units = time.perf_counter(), 200_000
    _work(units)
    return units / (time.perf_counter() - began)


async def thread_overlap(seconds: float = 0.5) -> float:
    """Wall time of `seconds` of Python work on the loop while a worker thread does as much, over `seconds`:
    2.0 means nothing ran beside the loop (the GIL), 1.0 that the thread's work was free."""
    loop = asyncio.get_running_loop()
    units = int(seconds * _units_per_second())
    with ThreadPoolExecutor(1) as pool:
        began = time.perf_counter()
        job = loop.run_in_executor(pool, _work, units)
        _work(units)
        await job
        return (time.perf_counter() - began) / seconds


def process_round_trip_us(reply: bytes, requests: int) -> float:
    ours, theirs = multiprocessing.Pipe()
    worker = multiprocessing.get_context("fork").Process(target=_serve, args=(theirs,), daemon=True)
    worker.start()
    message = bytes(2048) + reply
    try:
        for _ in range(50):
            ours.send_bytes(message)
            ours.recv_bytes()
        began = time.perf_counter()
        for _ in range(requests):
            ours.send_bytes(message)
            ours.recv_bytes()
        return (time.perf_counter() - began) / requests * 1e6
    finally:
        ours.send_bytes(b"")
        worker.join(2)


async def main_async(api: Api, requests: int) -> None:
    reply = reply_body(api, 1, None)
    judging = await judging_us(api, requests)
    handoff = await thread_handoff_us(requests)
    overlap = await thread_overlap()
    process = process_round_trip_us(reply, requests)
    print(f"{api}, small request, {requests} requests, {os.cpu_count()} CPUs")
    print(f"  judging on the loop (parse, inspect, complete):   {judging:8.1f} us per request")
    print(f"  worker thread, hand-off and back (no work):      {handoff:8.1f} us per request")
    print(f"  loop and a worker thread both working: {overlap:.2f}x the time of one (2.00x: no overlap, the GIL)")
    print(f"  worker process, {len(reply) + 2048} bytes over a pipe and back: {process:8.1f} us per request")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", choices=APIS, default="chat")
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.api, args.requests))


if __name__ == "__main__":
    main()
