"""The load client, in its own process: keep-alive aiohttp sessions, one per target.

    echo '{"mode": "sequential", "targets": [...], ...}' | python -m bench.load

It reads one JSON spec line on stdin, warms up, prints `{"event": "ready"}`
and waits for a `go` line (the orchestrator samples the servers' CPU in
between), measures, and prints `{"event": "done", "result": {...}}`. Modes:

- sequential: one request at a time, the targets interleaved round by round
  (request i goes to every target before request i+1), so they share the
  machine's noise; latency, time to first byte of the body (= first event of
  a stream) and, per target, the paired difference to the first target;
- concurrent: N workers against one target for a duration: throughput;
- growth: one run whose conversation grows a turn per request, interleaved
  over the targets; the CPU each target's process spent per request (its
  schedstat from one request to the next) and the client's own orjson parse
  time of each body, for the slope comparison;
- soak: many short runs (4 steps each) against one target, pausing at every
  checkpoint (`{"event": "checkpoint"}` then `go`) so RSS can be sampled.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from bench import payloads, serving
from bench.payloads import NONCE, Api
from bench.procs import CpuSample

_TIMEOUT = aiohttp.ClientTimeout(total=120)


@dataclass(slots=True)
class Sample:
    latency: float
    first_byte: float
    status: int
    trip: str | None
    warning: str | None
    size: int
    overhead: float | None = None  # the proxy's own x-runguard-overhead-ms (RunGuard's targets only)


@dataclass
class Tally:
    samples: list[Sample] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lat = [s.latency * 1000 for s in self.samples]
        ttfb = [s.first_byte * 1000 for s in self.samples]
        statuses: dict[str, int] = {}
        trips: dict[str, int] = {}
        warnings = 0
        for s in self.samples:
            statuses[str(s.status)] = statuses.get(str(s.status), 0) + 1
            if s.trip:
                trips[s.trip] = trips.get(s.trip, 0) + 1
            warnings += bool(s.warning)
        return {
            "n": len(lat),
            **percentiles(lat, "latency_ms"),
            **percentiles(ttfb, "first_byte_ms"),
            "statuses": statuses,
            "trips": trips,
            "warnings": warnings,
            "response_bytes": self.samples[-1].size if self.samples else 0,
            **percentiles([s.overhead for s in self.samples if s.overhead is not None], "overhead_ms"),
        }


def percentiles(values: list[float], name: str) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        f"{name}_p50": at(0.5),
        f"{name}_p90": at(0.9),
        f"{name}_p99": at(0.99),
        f"{name}_mean": statistics.fmean(ordered),
    }


async def send(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], method: str = "POST"
) -> Sample:
    start = time.perf_counter()
    first = 0.0
    size = 0
    async with session.request(method, url, data=body or None, headers=headers) as response:
        async for chunk in response.content.iter_any():
            if not first:
                first = time.perf_counter()
            size += len(chunk)
        end = time.perf_counter()
        return Sample(
            end - start,
            (first or end) - start,
            response.status,
            response.headers.get("x-runguard-trip"),
            response.headers.get("x-runguard-warning"),
            size,
            float(overhead) if (overhead := response.headers.get("x-runguard-overhead-ms")) else None,
        )


def new_session(limit: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=limit, keepalive_timeout=120, force_close=False)
    return aiohttp.ClientSession(
        connector=connector, timeout=_TIMEOUT, auto_decompress=False, skip_auto_headers=("User-Agent",)
    )


class Client:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.api: Api = spec.get("api", "chat")
        self.stream = bool(spec.get("stream", False))
        self.method: str = spec.get("method", "POST")
        self.path: str = spec.get("path") or payloads.request_path(self.api, self.stream)
        self.targets: list[dict[str, Any]] = spec["targets"]
        self.prefix: str = spec.get("run_prefix", "bench")
        extra = {"x-bench-variant": "1"}
        if spec.get("response") in ("large", "tokens"):
            extra["x-bench-response"] = spec["response"]
        if spec.get("pace_ms"):
            extra["x-bench-pace-ms"] = str(spec["pace_ms"])
        if spec.get("stall_ms"):
            extra["x-bench-stall-ms"] = str(spec["stall_ms"])
        self.base_headers = {**payloads.request_headers(self.api), **extra}
        get = self.method == "GET"
        self.template = b"" if get else payloads.scenario_request(self.api, self.stream, spec.get("size", "small"))
        self.counter = 0

    def next_request(self, run_id: str) -> tuple[bytes, dict[str, str]]:
        self.counter += 1
        body = self.template.replace(NONCE, f"NONCE_{self.counter:012d}".encode(), 1)
        return body, {**self.base_headers, "X-Run-Id": run_id}

    async def wait_go(self, event: dict[str, Any]) -> None:
        emit(event)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        if line.strip() != "go":
            raise SystemExit(0)

    async def sequential(self) -> dict[str, Any]:
        sessions = [new_session(1) for _ in self.targets]
        tallies = [Tally() for _ in self.targets]
        order = list(range(len(self.targets)))
        rng = random.Random(len(self.targets))
        block = int(self.spec.get("block", 1))  # requests sent to one target in a row (1: interleaved)
        pause = float(self.spec.get("pause_ms", 0)) / 1000  # between requests: a server's tail work ends
        try:
            for phase, rounds in (("warm", int(self.spec.get("warmup", 20))), ("run", int(self.spec["count"]))):
                if phase == "run":
                    await self.wait_go({"event": "ready"})
                for start in range(0, rounds, block):
                    # A new order every round: the request just before one target's (another
                    # server's tail work, the upstream's state) is not always the same target's.
                    rng.shuffle(order)
                    for t in order:
                        target = self.targets[t]
                        for i in range(start, min(start + block, rounds)):
                            body, headers = self.next_request(f"{self.prefix}-{phase}-{t}-{i}")
                            sample = await send(sessions[t], target["url"] + self.path, body, headers, self.method)
                            if phase == "run":
                                tallies[t].samples.append(sample)
                            if pause:
                                await asyncio.sleep(pause)
        finally:
            for session in sessions:
                await session.close()
        result: dict[str, Any] = {"request_bytes": len(self.template), "targets": {}}
        base = tallies[0].samples
        for target, tally in zip(self.targets, tallies, strict=True):
            summary = tally.summary()
            diffs = [(s.latency - b.latency) * 1000 for s, b in zip(tally.samples, base, strict=True)]
            first_diffs = [(s.first_byte - b.first_byte) * 1000 for s, b in zip(tally.samples, base, strict=True)]
            summary["added_ms_p50"] = statistics.median(diffs) if diffs else 0.0
            summary["added_first_byte_ms_p50"] = statistics.median(first_diffs) if first_diffs else 0.0
            result["targets"][target["name"]] = summary
        return result

    async def _workers(self, session: aiohttp.ClientSession, url: str, stop: float, tally: Tally, phase: str) -> None:
        async def worker(w: int) -> None:
            i = 0
            while time.perf_counter() < stop:
                body, headers = self.next_request(f"{self.prefix}-{phase}-{w}-{i}")
                i += 1
                tally.samples.append(await send(session, url, body, headers, self.method))

        await asyncio.gather(*(worker(w) for w in range(int(self.spec.get("concurrency", 32)))))

    async def concurrent(self) -> dict[str, Any]:
        target = self.targets[0]
        url = target["url"] + self.path
        session = new_session(int(self.spec.get("concurrency", 32)))
        try:
            await self._workers(
                session, url, time.perf_counter() + float(self.spec.get("warmup_s", 1.0)), Tally(), "warm"
            )
            await self.wait_go({"event": "ready"})
            tally = Tally()
            start = time.perf_counter()
            await self._workers(session, url, start + float(self.spec["duration"]), tally, "run")
            elapsed = time.perf_counter() - start
        finally:
            await session.close()
        summary = tally.summary()
        summary["rps"] = len(tally.samples) / elapsed
        summary["elapsed_s"] = elapsed
        return {"request_bytes": len(self.template), "targets": {target["name"]: summary}}

    async def growth(self) -> dict[str, Any]:
        steps = int(self.spec["steps"])
        bodies = [payloads.conversation_request(self.api, k, self.stream) for k in range(steps)]
        parse_us = [_parse_us(body) for body in bodies]
        sessions = [new_session(1) for _ in self.targets]
        pids = [target.get("pid") for target in self.targets]
        run_id = f"{self.prefix}-growth"
        rows: list[dict[str, Any]] = []
        await self.wait_go({"event": "ready"})
        try:
            marks = [_cpu(pid) for pid in pids]
            for k, body in enumerate(bodies):
                row: dict[str, Any] = {"step": k, "body_bytes": len(body), "parse_us": parse_us[k], "targets": {}}
                for t, target in enumerate(self.targets):
                    headers = {**self.base_headers, "X-Run-Id": run_id, "x-bench-variant": str(k)}
                    sample = await send(sessions[t], target["url"] + self.path, body, headers)
                    row["targets"][target["name"]] = {
                        "latency_ms": sample.latency * 1000,
                        "status": sample.status,
                        "trip": sample.trip,
                        "warning": sample.warning,
                    }
                rows.append(row)
                await asyncio.sleep(0.003)  # let each server finish the request's bookkeeping
                now = [_cpu(pid) for pid in pids]
                _charge(row, self.targets, marks, now)
                marks = now
        finally:
            for session in sessions:
                await session.close()
        return {"steps": rows}

    async def soak(self) -> dict[str, Any]:
        target = self.targets[0]
        apis: list[Api] = self.spec.get("apis", list(payloads.APIS))
        bodies = {
            (api, stream, s): payloads.conversation_request(api, s, stream)
            for api in apis
            for stream in (False, True)
            for s in range(4)
        }
        total, every = int(self.spec["count"]), int(self.spec["checkpoint_every"])
        session = new_session(int(self.spec.get("concurrency", 8)))
        tally = Tally()

        async def one(i: int) -> None:
            run = i // 4
            api, stream, step = apis[run % len(apis)], (run // len(apis)) % 2 == 1, i % 4
            headers = {
                **payloads.request_headers(api),
                "X-Run-Id": f"{self.prefix}-{run}",
                "x-bench-variant": str(step),
            }
            url = target["url"] + payloads.request_path(api, stream)
            tally.samples.append(await send(session, url, bodies[(api, stream, step)], headers))

        async def batch(start: int, end: int) -> None:
            queue = iter(range(start, end))

            async def worker() -> None:
                for i in queue:
                    await one(i)

            await asyncio.gather(*(worker() for _ in range(int(self.spec.get("concurrency", 8)))))

        started = time.perf_counter()
        try:
            await self.wait_go({"event": "checkpoint", "done": 0})
            for start in range(0, total, every):
                await batch(start, min(total, start + every))
                await self.wait_go({"event": "checkpoint", "done": min(total, start + every)})
        finally:
            await session.close()
        summary = tally.summary()
        summary["rps"] = len(tally.samples) / (time.perf_counter() - started)
        return {"targets": {target["name"]: summary}}


def _cpu(pid: int | None) -> float:
    return CpuSample.of(pid).sched if pid else 0.0


def _charge(row: dict[str, Any], targets: list[dict[str, Any]], before: list[float], after: list[float]) -> None:
    for t, target in enumerate(targets):
        row["targets"][target["name"]]["cpu_us"] = (after[t] - before[t]) * 1e6


def _parse_us(body: bytes) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        orjson.loads(body)
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(event).decode() + "\n")
    sys.stdout.flush()


async def main_async() -> None:
    spec = orjson.loads(sys.stdin.readline())
    client = Client(spec)
    mode = spec["mode"]
    runner = {
        "sequential": client.sequential,
        "concurrent": client.concurrent,
        "growth": client.growth,
        "soak": client.soak,
    }[mode]
    result = await runner()
    emit({"event": "done", "result": result})


def main() -> None:
    serving.run(main_async)


if __name__ == "__main__":
    main()
