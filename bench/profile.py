"""Profile the proxy's hot path in-process with pyinstrument and print the top costs.

    python -m bench.profile [--api chat|responses|gemini] [--stream] [--size small|large]
                            [--growth] [--requests 2000] [--top 30] [--html out.html]

The fake upstream and the load client run in their own processes, so what
the profiler samples (this process's main thread) is the proxy alone:
`create_app(settings)` with the bench's detector limits, served on loopback,
access log on and the collector set as with `runguard-proxy serve`. `--growth`
profiles the 300-step growing run instead of N identical-size requests. Prints
a request's steps (the time of each call the handler makes, and of what runs
outside the handler), then the functions with the most self time and the most
inclusive time (file:function), with the event loop's idle time taken out.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyinstrument import Profiler
from pyinstrument.frame import Frame

from bench import proxy_setup, serving
from bench.procs import LoadProcess, Services

ROOT = Path(__file__).resolve().parent.parent
_IDLE = {"run", "run_until_complete", "run_forever", "_run_once", "select", "poll", "wait"}
_HANDLER = "proxy/handlers.py"
# The handler's functions whose callees are its steps (parse, admit, the upstream call, the write, ...).
_STEPS_OF = {"handle", "_guarded", "_forward", "_forward_stream"}


@dataclass
class Costs:
    self_time: dict[str, float]
    inclusive: dict[str, float]
    idle: float
    total: float
    ours: set[str]


def _key(frame: Frame) -> str:
    return f"{frame.file_path_short}:{frame.line_no}:{frame.function}"


def _is_idle(frame: Frame) -> bool:
    path = frame.file_path or ""
    return frame.function in _IDLE and any(part in path for part in ("asyncio", "uvloop", "selectors"))


def aggregate(root: Frame) -> Costs:
    """Self and inclusive time per function over the whole tree (recursion counted once)."""
    costs = Costs({}, {}, 0.0, root.time, set())

    def walk(frame: Frame, on_path: frozenset[str]) -> None:
        if frame.is_synthetic:
            return
        key = _key(frame)
        own = frame.total_self_time
        path = frame.file_path or ""
        if path.startswith(str(ROOT)) and "/.venv/" not in path and "/bench/" not in path:
            costs.ours.add(key)
        if _is_idle(frame):
            costs.idle += own
        else:
            costs.self_time[key] = costs.self_time.get(key, 0.0) + own
            if key not in on_path:
                costs.inclusive[key] = costs.inclusive.get(key, 0.0) + frame.time
        for child in frame.children:
            walk(child, on_path | {key})

    walk(root, frozenset())
    return costs


def _in_handler(frame: Frame, names: Collection[str]) -> bool:
    return frame.function in names and (frame.file_path or "").endswith(_HANDLER)


def steps(root: Frame, idle: float) -> dict[str, float]:
    """Time per step of a guarded request: each callee of the handler's step functions (`_STEPS_OF`), the
    handler's own lines, and what runs outside the handler (aiohttp's server, the event loop's callbacks,
    the record store's batches), the event loop's `idle` time (`aggregate`'s) taken out."""
    found: dict[str, float] = {}
    handled = 0.0

    def add(step: str, seconds: float) -> None:
        found[step] = found.get(step, 0.0) + seconds

    def walk(frame: Frame) -> None:
        nonlocal handled
        if frame.is_synthetic:
            return
        if _in_handler(frame, ("handle",)):
            handled += frame.time
        if not _in_handler(frame, _STEPS_OF):
            for child in frame.children:
                walk(child)
            return
        add("(the handler's own lines)", frame.total_self_time)
        for child in frame.children:
            if _in_handler(child, _STEPS_OF):
                walk(child)
            elif not child.is_synthetic:
                add(child.function, child.time)

    walk(root)
    busy = root.time - idle
    found["(outside the handler)"] = max(0.0, busy - handled)
    return found


def report(costs: Costs, top: int, requests: int, by_step: dict[str, float] | None = None) -> str:
    busy = max(costs.total - costs.idle, 1e-9)
    lines = [
        f"sampled {costs.total:.2f}s, event loop idle {costs.idle:.2f}s, busy {busy:.2f}s "
        f"= {busy / max(requests, 1) * 1e6:.0f} us per request (profiler overhead included)",
        "",
    ]

    def table(title: str, data: dict[str, float], only_ours: bool) -> None:
        lines.append(title)
        rows = sorted(((v, k) for k, v in data.items() if not only_ours or k in costs.ours), reverse=True)[:top]
        for value, key in rows:
            lines.append(f"  {value / busy * 100:5.1f}%  {value / max(requests, 1) * 1e6:7.1f} us/req  {key}")
        lines.append("")

    if by_step:
        table("A request's steps (the handler's callees):", by_step, only_ours=False)
    table("Top self time (all code):", costs.self_time, only_ours=False)
    table("Top inclusive time (RunGuard code):", costs.inclusive, only_ours=True)
    return "\n".join(lines)


async def profile(args: argparse.Namespace, upstream: str, log_dir: Path) -> tuple[Profiler, int, float]:
    from runguard.proxy.serve import collector
    from runguard.proxy.serve.app import create_app
    from runguard.proxy.serve.server import start

    running = await start(
        create_app(proxy_setup.settings(upstream, frame=args.frame, database=log_dir / "profile.db")),
        "127.0.0.1",
        0,
        grace=1.0,
    )
    # The collector as `serve` leaves it: at CPython's default thresholds its pauses, charged to whatever
    # allocated last, put tens of microseconds a request on functions that cost one.
    collector.settle()
    target = {"name": "proxy", "url": running.url, "pid": os.getpid()}
    if args.concurrency:
        spec: dict[str, Any] = {
            "mode": "concurrent",
            "api": args.api,
            "stream": args.stream,
            "size": args.size,
            "concurrency": args.concurrency,
            "duration": args.seconds,
            "warmup_s": 0.5,
            "targets": [target],
            "run_prefix": "profile",
        }
    elif args.growth:
        spec = {
            "mode": "growth",
            "api": args.api,
            "stream": args.stream,
            "steps": args.requests,
            "targets": [target],
            "run_prefix": "profile",
        }
    else:
        spec = {
            "mode": "sequential",
            "api": args.api,
            "stream": args.stream,
            "size": args.size,
            "warmup": min(200, max(10, args.requests // 10)),
            "count": args.requests,
            "targets": [target],
            "run_prefix": "profile",
        }
    loop = asyncio.get_running_loop()
    load = LoadProcess(spec, log_dir / "load.log", ROOT, sys.executable)
    profiler = Profiler(interval=args.interval, async_mode="disabled")
    try:
        event = await loop.run_in_executor(None, load.next_event, 300.0)
        assert event["event"] == "ready", event
        started = time.process_time()
        profiler.start()
        load.go()
        event = await loop.run_in_executor(None, load.next_event, 1800.0)
        profiler.stop()
        cpu = time.process_time() - started
        load.close()
        if args.concurrency:  # a fixed duration: the request count comes from the load's report
            args.requests = int(event["result"]["targets"]["proxy"]["n"])
    finally:
        load.kill()
        await running.stop()
    return profiler, args.requests, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description="Profile the proxy's hot path in-process with pyinstrument.")
    parser.add_argument("--api", choices=("chat", "responses", "gemini"), default="chat")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--size", choices=("small", "large"), default="small")
    parser.add_argument("--growth", action="store_true", help="one run growing a turn per request (steps = --requests)")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=0, help="N concurrent clients for --seconds instead")
    parser.add_argument("--seconds", type=float, default=5.0, help="with --concurrency: how long")
    parser.add_argument("--interval", type=float, default=0.0005, help="sampling interval in seconds")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--html", type=Path, help="also write pyinstrument's HTML report here")
    parser.add_argument("--tree", action="store_true", help="also print pyinstrument's call tree")
    parser.add_argument("--no-uvloop", action="store_true")
    parser.add_argument("--frame", action="store_true", help="every detector off, no access log (the bare frame)")
    args = parser.parse_args()
    if args.growth and args.requests == 2000:
        args.requests = 300
    # As `runguard-proxy serve` does: INFO logging and the access log on, both written (to /dev/null
    # here, the access log through stdout), so their cost is in the profile.
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=open(os.devnull, "w"))  # noqa: SIM115
    report_to = sys.stdout
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    with tempfile.TemporaryDirectory(prefix="runguard-profile-") as tmp, Services(Path(tmp)) as services:
        upstream = services.start_announcing("upstream", [sys.executable, "-m", "bench.upstream"], cwd=ROOT)
        result: list[tuple[Profiler, int, float]] = []

        async def go() -> None:
            result.append(await profile(args, upstream.url, Path(tmp)))

        serving.run(go, use_uvloop=not args.no_uvloop)
    sys.stdout = report_to
    profiler, requests, cpu = result[0]
    sys.stdout.write(f"process CPU while measured: {cpu / requests * 1e6:.0f} us per request\n")
    session = profiler.last_session
    if session is None:
        raise SystemExit("no samples")
    root = session.root_frame()
    if root is None:
        raise SystemExit("no samples")
    if args.tree:
        sys.stdout.write(profiler.output_text(unicode=True, show_all=False) + "\n")
    if args.html:
        args.html.write_text(profiler.output_html(), encoding="utf-8")
    costs = aggregate(root)
    sys.stdout.write(report(costs, args.top, requests, steps(root, costs.idle)) + "\n")


if __name__ == "__main__":
    main()
