"""The guard's own cost per request, in-process, without HTTP: a quick loop for tuning the hot path.

    python -m bench.pipeline [--api chat|responses|gemini] [--size small|large|long] [--requests 3000]

Runs what the handler runs for a request, minus the sockets: key hashing,
`parse_request`, `admit`, `parse_response`, `response_seen`, `inspect` and
`complete`, against a `MemoryState`, with the bench's detector limits and the
store off (the access log goes to a logger that is off). Each request is its own
run, as in the latency scenario. Prints microseconds per request for each
phase (best of `--repeat` rounds), and the same loop with no detector armed as
the floor the detectors add to. Figures move with the machine: compare the two
rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Collection, Sequence
from typing import Any

from bench import proxy_setup
from bench.payloads import APIS, SIZES, Api, Size, scenario_request
from bench.replies import LARGE
from bench.replies import body as reply_body
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.guard import Guard
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.observer import NullObserver
from runguard.proxy.providers.base import RequestContext
from runguard.proxy.providers.registry import adapter_for
from runguard.proxy.providers.routes import resolve
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.serve.app import DiscardSink
from runguard.proxy.state.memory import MemoryState

PHASES = ("parse_request", "admit", "parse_response", "inspect", "complete")


def guard_for(detectors: Sequence[Any] | None, *, state: MemoryState | None = None, shadow: bool = False) -> Guard:
    """A guard with the bench's settings, records and observers off: `detectors` armed (None: every one),
    over `state` (default: a `MemoryState` of the default size); `shadow`: warn only, never block."""
    settings = proxy_setup.settings("http://127.0.0.1:9")
    if shadow:
        settings = settings.model_copy(update={"guard": settings.guard.model_copy(update={"shadow": True})})
    policy = Policy(every_detector() if detectors is None else list(detectors), settings.guard)
    tables = ModelTables(settings.pricing_file, settings.models_file)
    state = state if state is not None else MemoryState(max_scopes=settings.runs.max_runs)
    return Guard(settings, state, policy, tables, DiscardSink(), NullObserver())


def every_detector(but: Collection[str] = ()) -> list[Any]:
    """The default detectors, less those named in `but` (an unknown name is an error)."""
    from runguard.detectors.registry import default_detectors

    detectors = default_detectors()
    unknown = set(but) - {d.name for d in detectors}
    if unknown:
        raise ValueError(f"no such detector: {', '.join(sorted(unknown))}")
    return [d for d in detectors if d.name not in but]


async def _round(guard: Guard, api: Api, size: Size, requests: int) -> dict[str, float]:
    path = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}.get(api) or (
        "/v1beta/models/gemini-2.5-flash:generateContent"
    )
    route = resolve(path)
    assert route is not None
    hasher = KeyHasher(b"bench-salt-bench-salt")
    body = scenario_request(api, False, size)
    reply = reply_body(api, 1, LARGE if size == "large" else None)
    spent = dict.fromkeys(PHASES, 0.0)
    clock = time.perf_counter
    for i in range(requests):
        adapter = adapter_for(route.api)
        assert adapter is not None
        t0 = clock()
        key_hash = hasher.hash("sk-bench-0123456789abcdef")
        info = adapter.parse_request(body, RequestContext(route.model, None, False))
        t1 = clock()
        ticket = await guard.admit(adapter, info, body=body, key_hash=key_hash, header_run=f"run-{i}")
        t2 = clock()
        assert ticket.answer is None, ticket.blocked_by
        parsed = adapter.parse_response(reply)
        seen = guard.response_seen(ticket, parsed, 200, 0.001)
        t3 = clock()
        guard.inspect(ticket, seen)
        t4 = clock()
        await guard.complete(ticket, seen, client_status=200)
        t5 = clock()
        for phase, took in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            spent[phase] += took
    return {phase: took / requests * 1e6 for phase, took in spent.items()}


async def run_once(api: Api, size: Size, requests: int, bare: bool, without: Collection[str] = ()) -> None:
    """`requests` requests through a fresh guard, untimed (what `bench.instructions` counts).

    `bare`: no detector; `without`: every detector but these.
    """
    await _round(guard_for([] if bare else every_detector(without)), api, size, requests)


async def measure(api: Api, size: Size, requests: int, repeat: int, bare: bool) -> dict[str, float]:
    rounds = []
    for _ in range(repeat):
        guard = guard_for([] if bare else None)  # a fresh state each round: the same work every round
        rounds.append(await _round(guard, api, size, requests))
    best = min(rounds, key=lambda r: sum(r.values()))
    best["total"] = sum(best.values())
    best["median_total"] = statistics.median(sum(r[p] for p in PHASES) for r in rounds)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", choices=APIS, default="chat")
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.size != "small":
        args.requests = min(args.requests, 300)
    print(f"{args.api} {args.size}: us per request, best of {args.repeat} rounds of {args.requests}")
    print(f"{'':12}" + "".join(f"{p:>15}" for p in (*PHASES, "total")))
    for label, bare in (("no detector", True), ("all", False)):
        row = asyncio.run(measure(args.api, args.size, args.requests, args.repeat, bare))
        print(f"{label:12}" + "".join(f"{row[p]:15.1f}" for p in (*PHASES, "total")))


if __name__ == "__main__":
    main()
