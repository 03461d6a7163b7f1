"""A served proxy under load, sampled from outside: py-spy's top Python functions, or perf's top C symbols.

    python -m bench.spy [--frame] [--floor] [--clients 32] [--seconds 8] [--stream] [--top 25]
                        [--rate 200] [--native] [--idle] [--out FILE] [--perf]

Starts the fake upstream and one `runguard-proxy serve` as `bench.run` runs it
(every detector, SQLite records, the access log; `--frame`: every detector off,
no store, no access log; `--floor`: `bench/floor.py` instead), drives it with
`bench.load`'s concurrent mode (`--clients` keep-alive clients, small chat
requests, each its own run) and records it with `py-spy record --format raw`
for `--seconds`. Prints the functions holding the most samples on their own
(self) and under them (inclusive), in percent of the samples where the process
was not idle (`--idle` keeps idle samples in). py-spy is optional:
`pip install py-spy` (the `bench` extra). py-spy counts a thread blocked in a
system call or preempted as running: wall time, not CPU (on a busy machine it shows the
stage clock's `time.thread_time()` system calls, where the process is often preempted, as 20%
of the samples, against 0.2% of the CPU under perf). `--perf` samples the CPU instead:
`perf record -e cpu-clock` (a software clock: no hardware counters needed) on the same
process, then the shares of its libraries and its top symbols (C functions: CPython's
interpreter, the collector, the kernel's), where py-spy cannot tell running from waiting.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from bench import proxy_setup
from bench.procs import LoadProcess, Services

ROOT = Path(__file__).resolve().parent.parent
_IDLE = ("select (selectors.py", "_run_once (asyncio/base_events.py", "run_forever (uvloop", "poll (selectors")


def _frames(stack: str) -> list[str]:
    """`thread;frame;frame;... count` -> the frames, outermost first (the thread's name dropped)."""
    return stack.split(";")[1:]


def _idle(frames: list[str]) -> bool:
    """A sample in the event loop's wait (uvloop's run shows as its `run` frame with nothing under it)."""
    if not frames:
        return True
    last = frames[-1]
    return any(mark in last for mark in _IDLE) or last.startswith("run (uvloop") or "epoll" in last


def top(raw: Path, count: int, keep_idle: bool) -> str:
    """The top `count` self and inclusive functions of a py-spy raw (collapsed) file."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = _frames(stack)
        if not keep_idle and _idle(frames):
            continue
        samples = int(n)
        total += samples
        if frames:
            own[frames[-1]] += samples
        for frame in set(frames):
            under[frame] += samples
    if not total:
        return "no samples"
    lines = [f"{total} busy samples", "", "self %  function"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in own.most_common(count)]
    lines += ["", "incl %  function"]
    lines += [f"{100 * n / total:6.1f}  {name}" for name, n in under.most_common(count)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frame", action="store_true", help="every detector off, no store, no access log")
    parser.add_argument("--floor", action="store_true", help="the read-and-parse floor instead of RunGuard")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    parser.add_argument("--idle", action="store_true", help="keep the event loop's idle samples")
    parser.add_argument("--out", type=Path, help="keep py-spy's raw samples (or perf's data) here")
    parser.add_argument("--perf", action="store_true", help="perf's CPU samples instead of py-spy's")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="rg-spy-") as tmp_name, Services(Path(tmp_name)) as services:
        tmp = Path(tmp_name)
        upstream = services.start_announcing("upstream", [py, "-m", "bench.upstream"], cwd=ROOT)
        if args.floor:
            target = services.start_announcing("floor", [py, "-m", "bench.floor", "--upstream", upstream.url], cwd=ROOT)
        else:
            target = proxy_setup.start_proxy(services, tmp, upstream.url, "proxy", frame=args.frame)
        spec = {
            "mode": "concurrent",
            "api": "chat",
            "stream": args.stream,
            "size": "small",
            "targets": [{"name": "target", "url": target.url}],
            "concurrency": args.clients,
            "duration": args.seconds + 2.0,
            "warmup_s": 2.0,
            "run_prefix": "spy",
        }
        load = LoadProcess(spec, tmp / "load.log", ROOT, py)
        raw = args.out or tmp / "spy.txt"
        try:
            load.next_event(120)
            load.go()
            if args.perf:
                command = ["perf", "record", "-e", "cpu-clock", "-F", "2000", "-g", "-p", str(target.pid)]
                command += ["-o", str(raw), "--", "sleep", str(int(args.seconds))]
            else:
                command = [spy, "record", "--nonblocking", "-r", str(args.rate), "-f", "raw", "-o", str(raw)]
                command += ["-p", str(target.pid), "-d", str(int(args.seconds))]
                if args.native:
                    command.append("--native")
            recorder = threading.Thread(target=subprocess.run, args=(command,), kwargs={"capture_output": True})
            recorder.start()
            done = load.next_event(args.seconds + 120)
            recorder.join()
        finally:
            load.close()
        result = done["result"]["targets"]["target"]
        print(f"{result['rps']:.0f} req/s over {result['elapsed_s']:.1f} s, {args.clients} clients")
        print(perf_top(raw, args.top) if args.perf else top(raw, args.top, args.idle))


def perf_top(data: Path, count: int) -> str:
    """perf's shares of CPU samples by library, then by symbol (self), of a `perf record` file."""
    lines = []
    for sort in ("dso", "sym"):
        report = subprocess.run(
            ["perf", "report", "-i", str(data), "--no-children", "--sort", sort, "-g", "none", "--stdio"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        rows = [row.rstrip() for row in report.splitlines() if row.strip() and not row.startswith("#")]
        lines += [f"by {sort}:", *rows[:count], ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
