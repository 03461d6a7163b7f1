"""`bench.run`'s options and what they make of a run: how many requests and seconds each scenario gets."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

from bench import payloads

CLIENTS = (16, 32)  # concurrent clients of the throughput phases (issue #39: 16-32)
SCENARIOS = ("latency", "stall", "throughput", "growth", "state", "soak")


@dataclass(frozen=True)
class Plan:
    """How many requests and seconds each scenario gets."""

    small_warmup: int
    small_rounds: int
    large_warmup: int
    large_rounds: int
    stall_rounds: int
    stall_ms: int
    tokens_rounds: int
    throughput_s: float
    throughput_rounds: int
    concurrencies: tuple[int, ...]  # clients of the throughput phases, each its own phase
    growth_steps: int
    growth_apis: tuple[str, ...]
    soak_requests: int
    soak_every: int
    soak_max_runs: int
    soak_concurrency: int

    @classmethod
    def make(
        cls,
        quick: bool,
        soak_requests: int | None = None,
        soak_clients: int | None = None,
        clients: tuple[int, ...] = CLIENTS,
    ) -> Plan:
        if quick:
            plan = cls(20, 150, 5, 30, 40, 20, 6, 1.5, 2, clients, 300, ("chat",), 5_000, 1_000, 1_000, 8)
        else:
            plan = cls(
                200, 2_000, 20, 200, 200, 20, 40, 5.0, 3, clients, 300, payloads.APIS, 100_000, 10_000, 10_000, 8
            )
        if soak_requests is not None:
            plan = replace(plan, soak_requests=soak_requests)
        return plan if soak_clients is None else replace(plan, soak_concurrency=soak_clients)


def plan(args: argparse.Namespace) -> Plan:
    """The plan the command line asks for."""
    return Plan.make(args.quick, args.soak_requests, args.soak_clients, tuple(args.clients))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """`bench.run`'s command line (see bench/README.md)."""
    parser = argparse.ArgumentParser(description="RunGuard proxy benchmarks against baselines (see bench/README.md).")
    parser.add_argument("--quick", action="store_true", help="short everything (a few minutes; about 6 with --litellm)")
    parser.add_argument("--only", nargs="+", choices=SCENARIOS)
    parser.add_argument("--no-nginx", action="store_true")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="also run proxy_redis_xN: `serve --workers N` on Redis (CPU counted over its workers)",
    )
    parser.add_argument(
        "--frame",
        action="store_true",
        help="also run proxy_frame: every detector off, no store, no access log (what the detectors add to)",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="CHECKOUT",
        help="also run proxy_before (and proxy_redis_before, when Redis is up): the proxy of another checkout"
        " (e.g. a git worktree of an older commit)",
    )
    parser.add_argument(
        "--litellm",
        type=Path,
        metavar="VENV",
        help="also run the LiteLLM proxy from this virtual environment (pip install 'litellm[proxy]' there)",
    )
    parser.add_argument(
        "--soak-requests",
        type=int,
        metavar="N",
        help="requests in the RSS soak (default 100000, 5000 with --quick; RSS settles after ~200000 here)",
    )
    parser.add_argument(
        "--soak-clients",
        type=int,
        metavar="N",
        help="concurrent clients in the RSS soak (default 8; 32 keeps the proxy's core busy all the time)",
    )
    parser.add_argument(
        "--soak-database-url",
        metavar="URL",
        help="the soak proxy's record store (default: a SQLite file of its own); e.g."
        " postgresql+asyncpg://127.0.0.1/test?schema=bench_soak (the proxy migrates it; nothing is dropped)",
    )
    parser.add_argument(
        "--clients",
        type=int,
        nargs="+",
        default=list(CLIENTS),
        metavar="N",
        help="concurrent clients of the throughput phases, each its own phase (default 16 32)",
    )
    parser.add_argument("--out", type=Path, help="results file (default bench/results/<timestamp>.json)")
    parser.add_argument("--md", type=Path, metavar="FILE", help="also write the summary tables (markdown) to FILE")
    return parser.parse_args(argv)
