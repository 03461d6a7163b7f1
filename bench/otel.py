"""What OpenTelemetry export costs a request, and that a dead collector costs it nothing.

    .venv/bin/python -m bench.otel [--requests 400]

Starts the bench's fake provider, an OTLP collector (`tests.support.otlp_receiver`
in a process of its own, `--collector`), a "hung" collector (accepts connections,
never answers) and one `runguard-proxy serve` per variant:

- `off`         no OTEL_* variables: no SDK is even imported;
- `http`        export over OTLP/HTTP to the live collector;
- `grpc`        export over OTLP/gRPC to the live collector;
- `refused`     OTLP/HTTP to a port nothing listens on;
- `hung`        OTLP/HTTP to the collector that never answers (each export waits its full timeout).

The client sends agent-loop requests (Chat Completions, a run of 10 growing
steps, each with a tool result, so every request makes a chat span, a tool
span and keeps a turn open) to every variant in turn, interleaved request by
request so they share the machine's noise, and prints the latency per variant,
its ratio to `off`, and what the proxies counted as dropped. Measured, never
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from bench import payloads, proxy_setup, serving
from bench.procs import Service, Services, free_port
from tests.support.otlp_receiver import hung_collector

STEPS = 10  # requests per run


async def _collector_main() -> None:
    from tests.support.otlp_receiver import OtlpReceiver

    receiver = OtlpReceiver()
    http = await receiver.start_http()
    grpc = await receiver.start_grpc()
    ready = {"ready": True, "port": int(http.rsplit(":", 1)[1]), "grpc_port": int(grpc.rsplit(":", 1)[1])}
    print(orjson.dumps({**ready, "pid": os.getpid()}).decode(), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(15, stop.set)
    await stop.wait()
    print(orjson.dumps({"spans": len(receiver.spans), "exports": receiver.exports}).decode(), flush=True)
    await receiver.stop()


def _proxy(services: Services, name: str, upstream: str, config: Path, otel: dict[str, str]) -> Service:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {"RUNGUARD_OPENAI_UPSTREAM": upstream, "RUNGUARD_DATABASE_URL": "", **otel}
    cmd = [str(Path(sys.executable).with_name("runguard-proxy")), "serve", "--port", str(port), "--config", str(config)]
    return services.start_http(name, cmd, port, health="/runguard/health", env=env)


async def _drive(targets: dict[str, str], requests: int) -> dict[str, list[float]]:
    bodies = [payloads.conversation_request("chat", step, False) for step in range(1, STEPS + 1)]
    latencies: dict[str, list[float]] = {name: [] for name in targets}
    headers = payloads.request_headers("chat")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for index in range(requests):
            order = list(targets.items())
            random.shuffle(order)
            step = index % STEPS
            for name, url in order:
                sent = {**headers, "X-Run-Id": f"bench-otel-{name}-{index // STEPS}", "x-bench-variant": str(step)}
                began = time.perf_counter()
                async with session.post(url + "/v1/chat/completions", data=bodies[step], headers=sent) as reply:
                    await reply.read()
                    assert reply.status == 200, (name, reply.status)
                latencies[name].append((time.perf_counter() - began) * 1000)
    return latencies


async def _dropped(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url + "/runguard/metrics") as reply:
        text = await reply.text()
    lines = [line for line in text.splitlines() if line.startswith("runguard_otel_spans_dropped_total")]
    counts = (f"{line.split('reason=')[1].split('}')[0].strip(chr(34))}={line.rsplit(' ', 1)[1]}" for line in lines)
    return ", ".join(counts) or "-"


def _row(name: str, values: list[float], base: list[float] | None) -> str:
    ordered = sorted(values)
    p50, p95 = statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]
    ratio = f"{p50 / statistics.median(base):.2f}x" if base else "1.00x"
    return (
        f"{name:8} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  mean {statistics.fmean(ordered):7.2f} ms  p50 vs off {ratio}"
    )


async def _main(requests: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="bench-otel-"))
    config = proxy_setup.write_config(home / "runguard.yaml")
    hung, hung_url = await hung_collector()
    with Services(home) as services:
        upstream = services.start_announcing("upstream", [sys.executable, "-m", "bench.upstream"])
        collector = services.start_announcing("collector", [sys.executable, "-m", "bench.otel", "--collector"])
        ready = orjson.loads(collector.log.read_bytes().splitlines()[0])
        live_http, live_grpc = f"http://127.0.0.1:{ready['port']}", f"http://127.0.0.1:{ready['grpc_port']}"
        variants = {
            "off": {},
            "http": {"OTEL_EXPORTER_OTLP_ENDPOINT": live_http},
            "grpc": {"OTEL_EXPORTER_OTLP_ENDPOINT": live_grpc, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "refused": {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"},
            "hung": {"OTEL_EXPORTER_OTLP_ENDPOINT": hung_url},
        }
        proxies = {name: _proxy(services, f"proxy-{name}", upstream.url, config, env) for name, env in variants.items()}
        targets = {name: service.url for name, service in proxies.items()}
        await _drive(targets, min(50, requests))  # warm-up: connections, caches, the SDK's first batch
        latencies = await _drive(targets, requests)
        dropped = {name: await _dropped(url) for name, url in targets.items()}
        services.stop(collector)
        received = orjson.loads(collector.log.read_bytes().splitlines()[-1])
    hung.close()
    await hung.wait_closed()
    print(f"{requests} requests per variant, interleaved; chat, {STEPS}-step runs, each with a tool result")
    for name, values in latencies.items():
        print(_row(name, values, latencies["off"] if name != "off" else None), " dropped:", dropped[name])
    print(f"live collector received {received['spans']} spans in {received['exports']} exports")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--collector", action="store_true", help="run as the OTLP collector process")
    args = parser.parse_args()
    if args.collector:
        serving.run(_collector_main, use_uvloop=False)
        return
    asyncio.run(_main(args.requests))


if __name__ == "__main__":
    main()
