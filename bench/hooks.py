"""What each detector's hooks cost, in-process: CPU microseconds per request, per detector and hook.

    python -m bench.hooks [--api chat|responses|gemini] [--size small|large|long] [--requests 1000]

Runs `bench.pipeline`'s loop (every detector armed, each request its own run)
with every hook the engine calls wrapped in a clock of the thread's CPU time
(`time.thread_time`: the time other processes take on a shared machine is not
in it), and prints the best of `--repeat` rounds per detector and hook. Work
that several detectors share (a result's digest, a call's sketch) is counted
where it is first done. Each call is counted with the clock's own cost (about
half a microsecond); use `bench.instructions` for an A/B of a change.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench import pipeline
from bench.payloads import APIS, SIZES
from runguard.proxy.guard.lineup import engine

HOOKS = ("plan_request", "check_request", "inspect_response", "plan_response", "check_response")
Spent = defaultdict[tuple[str, str], float]


def _clocked(spent: Spent) -> Callable[[type[engine.Hook], engine.Armed, str], engine.Hook]:
    """`Hook.of` whose hooks add their thread CPU time to `spent[(detector, hook)]`."""
    plain = engine.Hook.of.__func__  # type: ignore[attr-defined]

    def of(cls: type[engine.Hook], armed: engine.Armed, hook: str) -> engine.Hook:
        bound = plain(cls, armed, hook)
        call, key, clock = bound.call, (armed.name, hook), time.thread_time

        def timed(*args: Any) -> Any:
            start = clock()
            try:
                return call(*args)
            finally:
                spent[key] += clock() - start

        object.__setattr__(bound, "call", timed)
        return bound

    return of


def measure(api: Any, size: Any, requests: int, repeat: int) -> dict[tuple[str, str], float]:
    """Microseconds per request of each (detector, hook), the best of `repeat` rounds."""
    spent: Spent = defaultdict(float)
    plain = engine.Hook.of
    engine.Hook.of = classmethod(_clocked(spent))  # type: ignore[assignment, method-assign]
    best: dict[tuple[str, str], float] = {}
    try:
        for _ in range(repeat):
            spent.clear()
            asyncio.run(pipeline.run_once(api, size, requests, False))
            for key, took in spent.items():
                best[key] = min(best.get(key, took), took)
    finally:
        engine.Hook.of = plain  # type: ignore[method-assign]
    return {key: took / requests * 1e6 for key, took in best.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", choices=APIS, default="chat")
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    costs = measure(args.api, args.size, args.requests, args.repeat)
    rows: dict[str, dict[str, float]] = defaultdict(dict)
    for (detector, hook), us in costs.items():
        rows[detector][hook] = us
    print(f"{args.api} {args.size}: CPU us per request, best of {args.repeat} rounds of {args.requests}")
    print(f"{'detector':24}" + "".join(f"{h:>17}" for h in HOOKS) + f"{'total':>9}")
    for detector, row in sorted(rows.items(), key=lambda item: -sum(item[1].values())):
        cells = "".join(f"{row[h]:17.1f}" if h in row else f"{'-':>17}" for h in HOOKS)
        print(f"{detector:24}{cells}{sum(row.values()):9.1f}")
    print(f"{'all':24}" + "".join(f"{sum(r.get(h, 0.0) for r in rows.values()):17.1f}" for h in HOOKS))


if __name__ == "__main__":
    main()
