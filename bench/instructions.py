"""The guard's cost per request in CPU instructions: an A/B measure that the machine's noise cannot move.

    python -m bench.instructions [--api chat|responses|gemini|all] [--size small|large|long]
                                 [--requests 250] [--bare] [--compare DIR | --each]

Runs `bench.pipeline`'s loop (key hash, parse, admit, parse the response,
inspect, complete; in-process, memory state, every detector armed unless
`--bare`) under `valgrind --tool=callgrind`, once with `--requests` + 100
requests and once with 100, and prints the difference divided by `--requests`:
instructions per request, start-up and warm-up taken out. The same code gives
the same count to about 0.1% whatever else the machine is doing, so changes of
a percent show, where timings on a small shared machine move by 10-30%.
`--compare DIR` counts another checkout (a git worktree) the same way: this
checkout's harness over that checkout's `runguard` (so the guard's API must
not have changed between the two).

Instructions are not time: cache misses, syscalls and the kernel are not in
them. Use it to tell whether a change to the Python hot path does less work;
use `bench.run` for what a request costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import proxy_setup
from bench.payloads import APIS, SIZES, Api

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 100  # requests both runs make: imports, first-call costs and caches cancel out
_COLLECTED = re.compile(r"Collected : (\d+)")


def count(source: str | None, api: Api, size: str, requests: int, bare: bool, without: str = "") -> int:
    """Instructions callgrind counts for one in-process run of `requests` requests.

    `source`: a PYTHONPATH that imports `runguard` from another checkout (None: this one);
    `without`: a detector left out.
    """
    env = dict(os.environ, PYTHONHASHSEED="0")  # str hashes, hence dict layouts, the same every run
    if source is not None:
        env["PYTHONPATH"] = source
    with tempfile.TemporaryDirectory(prefix="runguard-callgrind-") as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={Path(tmp) / 'out'}",
            sys.executable,
            "-m",
            "bench.instructions",
            "--inner",
            "--api",
            api,
            "--size",
            size,
            "--requests",
            str(requests),
            *(["--bare"] if bare else []),
            *(["--without", without] if without else []),
        ]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1))


def per_request(
    pool: ThreadPoolExecutor, source: str | None, api: Api, size: str, requests: int, bare: bool, without: str = ""
) -> Callable[[], float]:
    """Starts both counts (side by side: a count does not depend on the load); call the result to wait."""
    more = pool.submit(count, source, api, size, WARMUP + requests, bare, without)
    less = pool.submit(count, source, api, size, WARMUP, bare, without)
    return lambda: (more.result() - less.result()) / requests


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", choices=(*APIS, "all"), default="chat")
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--requests", type=int, default=250)
    parser.add_argument("--bare", action="store_true", help="no detector armed: the guard's own work")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--compare", type=Path, help="also count this checkout (e.g. a git worktree)")
    chosen.add_argument("--each", action="store_true", help="what each detector costs (every detector, less one)")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)  # the run valgrind watches
    parser.add_argument("--without", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.each and args.bare:
        parser.error("--each counts with and without detectors itself: drop --bare")
    apis: tuple[Api, ...] = APIS if args.api == "all" else (args.api,)
    if args.inner:
        asyncio.run(_inner(apis[0], args.size, args.requests, args.bare, args.without))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    if args.each:
        for api in apis:
            _each(api, args.size, args.requests)
        return
    what = "no detector" if args.bare else "every detector"
    print(f"instructions per request, {args.size}, {what}, {args.requests} requests after {WARMUP}")
    with (
        tempfile.TemporaryDirectory(prefix="runguard-layout-") as layout,
        ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as counting,
    ):
        targets: list[tuple[str, str | None]] = [("this checkout", None)]
        if args.compare:
            targets.append(("compared", proxy_setup.source_path(args.compare, Path(layout))))
        for api in apis:
            pending = [per_request(counting, source, api, args.size, args.requests, args.bare) for _, source in targets]
            counts = [result() for result in pending]
            row = "  ".join(f"{label} {n:,.0f}" for (label, _), n in zip(targets, counts, strict=True))
            change = f"  ({counts[0] / counts[1] - 1:+.1%})" if len(counts) == 2 else ""
            print(f"{api:10} {row}{change}")


def _each(api: Api, size: str, requests: int) -> None:
    """Per detector, the instructions per request that turning it off saves; sorted, costliest first.

    Work that detectors share (one digest read by several) is counted only when
    no detector reading it is left, so the rows add up to less than the total.
    """
    from bench.pipeline import every_detector

    names = [d.name for d in every_detector()]
    print(f"{api} {size}: instructions per request each detector adds, {requests} requests after {WARMUP}")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as counting:
        every = per_request(counting, None, api, size, requests, bare=False)
        bare = per_request(counting, None, api, size, requests, bare=True)
        less = {name: per_request(counting, None, api, size, requests, False, name) for name in names}
        total, floor = every(), bare()
        added = sorted(((total - result(), name) for name, result in less.items()), reverse=True)
    print(f"{'every detector':24}{total:>12,.0f}")
    print(f"{'no detector':24}{floor:>12,.0f}")
    print(f"{'detectors in all':24}{total - floor:>12,.0f}  (100%)")
    for cost, name in added:
        print(f"  {name:22}{cost:>12,.0f}  ({cost / (total - floor):5.1%})")


async def _inner(api: Api, size: str, requests: int, bare: bool, without: str) -> None:
    from bench.pipeline import run_once

    await run_once(api, size, requests, bare, (without,) if without else ())


if __name__ == "__main__":
    main()
