"""Instructions per request of whole server processes, over HTTP: the CPU target without the noise.

    python -m bench.server_instructions [--api chat|responses|gemini|all] [--stream]
                                        [--size small|large|long|growth]
                                        [--response tokens|large] [--pace-ms MS]
                                        [--requests 200] [--compare DIR] [--parts] [--keep DIR]

`bench.instructions` counts the guard in-process; this counts what the CPU
target is about, the server process serving real requests on loopback: the
minimal pass-through, RunGuard's frame (every detector off, no store, no access
log) and RunGuard as `bench.run` runs it (every detector, SQLite records, the
access log), each under `valgrind --tool=callgrind` with counting off until
warmed up, then through a burn-in counted and thrown away. Per scenario the
counters are zeroed, `--requests` requests are sent one at a time (each its
own run), the after-work (the last batch of records) is given time to finish,
and the counters are dumped: instructions per request, and the ratio to the
pass-through's. `--size growth` sends one run instead, its conversation a tool
turn longer every request (steps 0 to `--requests`, as `bench.run`'s growth
run): the average over a run whose history grows. Handler, relay and aiohttp
changes show here, where `bench.instructions` does not see them. `--compare DIR`
adds RunGuard from another checkout (a git worktree) beside this one.
`--response tokens` answers each request with `bench.run`'s "tokens" stream
(~250 small deltas; with `--pace-ms 1` one a millisecond, each arriving alone),
`--response large` with about 300 KB of text. `--parts` also counts RunGuard
without its record store and access log, and without its store, and prints
what each part adds (the frame, the detectors, the access log, the store:
each the difference of two servers). `--keep DIR` copies callgrind's
dumps there (`<server>.cg.<n>`, one per scenario in order) for `callgrind_annotate`.

Instructions are not CPU time: the kernel's work (the sockets, the same for
every server) is not in them, so these ratios are higher than `bench.run`'s
CPU ratios. Compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench import load, payloads, proxy_setup
from bench.payloads import APIS, SIZES, Api
from bench.procs import Service, Services, free_port

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 100  # requests per scenario before counting starts (imports, first-call costs, caches)
BURN_IN = 100  # requests counted and thrown away before the first count (see `_measure`)
# Under valgrind a server answers some 40 requests a second, not 1000: with the store's default
# flush interval (0.25 s) its batches would hold ~10 records, not the ~250 of full speed, and the
# per-batch work would count 25 times over. A longer interval gives batches of full-speed size.
FLUSH_INTERVAL = 5.0
SETTLE = FLUSH_INTERVAL + 1.0  # seconds after a scenario's last answer: its last batch is written
START_TIMEOUT = 180.0  # a server under valgrind takes tens of seconds to import
GROWTH = "growth"  # a "size": one run of `--requests` requests whose conversation grows every request


@dataclass(frozen=True)
class Scenario:
    api: Api
    stream: bool
    size: str
    response: str = ""  # "tokens" or "large": the upstream's answer (bench.upstream's x-bench-response)
    pace_ms: float = 0.0

    @property
    def label(self) -> str:
        answer = f" {self.response} resp" if self.response else ""
        return f"{self.api} {'stream' if self.stream else 'whole'} {self.size}{answer}"


@dataclass
class Counted:
    """One server under callgrind."""

    name: str
    service: Service
    out: Path  # callgrind's output file; each dump adds `<out>.<n>`
    dumps: int = 0

    def _control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.service.pid)], check=True, capture_output=True)

    def start_counting(self) -> None:
        self._control("--instr=on")

    def zero(self) -> None:
        self._control("--zero")

    def dump(self) -> int:
        """Dump the counters; the instructions since the last zero."""
        self._control("--dump")
        self.dumps += 1
        dumped = Path(f"{self.out}.{self.dumps}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if dumped.exists():
                for line in dumped.read_text(errors="replace").splitlines():
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: callgrind wrote no dump at {dumped}")


def _valgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def _start_passthrough(services: Services, tmp: Path, upstream: str) -> Counted:
    port = free_port()
    out = tmp / "passthrough.cg"
    cmd = [*_valgrind(out), sys.executable, "-m", "bench.passthrough", "--upstream", upstream, "--port", str(port)]
    service = services.start_http("passthrough", cmd, port, cwd=ROOT, timeout=START_TIMEOUT)
    return Counted("passthrough", service, out)


def _start_proxy(
    services: Services,
    tmp: Path,
    upstream: str,
    name: str,
    frame: bool,
    source: Path | None,
    *,
    records: bool = True,
    access_log: bool = True,
) -> Counted:
    out = tmp / f"{name}.cg"
    service = proxy_setup.start_proxy(
        services,
        tmp,
        upstream,
        name,
        frame=frame,
        source=source,
        store={"flush_interval": FLUSH_INTERVAL},
        wrapper=_valgrind(out),
        timeout=START_TIMEOUT,
        records=records,
        access_log=access_log,
    )
    return Counted(name, service, out)


async def _send(url: str, scenario: Scenario, requests: int, prefix: str) -> None:
    """`requests` requests one at a time, each its own run (with `growth`: one run whose conversation
    grows a tool turn per request, as the growth scenario of `bench.run`); any answer but 200 stops the count."""
    growth = scenario.size == GROWTH
    size = "small" if growth else scenario.size
    spec = {"api": scenario.api, "stream": scenario.stream, "size": size, "targets": []}
    client = load.Client({**spec, "response": scenario.response, "pace_ms": scenario.pace_ms})
    async with load.new_session(1) as session:
        for i in range(requests):
            body, headers = client.next_request(f"{prefix}-{i}")
            if growth:
                body = payloads.conversation_request(scenario.api, i, scenario.stream)
                headers = {**headers, "X-Run-Id": prefix, "x-bench-variant": str(i)}
            sample = await load.send(session, url + client.path, body, headers)
            if sample.status != 200:
                raise RuntimeError(f"{url}: {scenario.label} answered {sample.status} (trip: {sample.trip})")


def _measure(server: Counted, scenarios: list[Scenario], requests: int) -> dict[str, float]:
    url = server.service.url
    for scenario in scenarios:
        asyncio.run(_send(url, scenario, WARMUP, f"warm-{server.name}-{scenario.label}"))
    server.start_counting()
    # A burn-in with counting on, thrown away. Without it, one of two proxies of the same commit
    # counted side by side (`--compare`) carried a one-time 26-40M instructions in its first
    # counted scenario, in every repeat (+16% per request at 100 requests); with 20 requests of
    # burn-in +3%, with 100 the two agree within 0.5%. Its cause is not pinned down.
    asyncio.run(_send(url, scenarios[0], BURN_IN, f"burn-{server.name}"))
    time.sleep(SETTLE)  # the warm-up's and burn-in's records are written before the first count
    counts: dict[str, float] = {}
    for scenario in scenarios:
        server.zero()
        asyncio.run(_send(url, scenario, requests, f"count-{server.name}-{scenario.label}"))
        time.sleep(SETTLE)
        counts[scenario.label] = server.dump() / requests
    return counts


def _table(scenarios: list[Scenario], counts: dict[str, dict[str, float]]) -> str:
    names = list(counts)
    head = f"{'scenario':24}" + "".join(f"{name:>16}{'x pass':>8}" for name in names)
    rows = [head, "-" * len(head)]
    for scenario in scenarios:
        base = counts["passthrough"][scenario.label]
        cells = "".join(
            f"{counts[name][scenario.label]:>16,.0f}{counts[name][scenario.label] / base:>7.2f}x" for name in names
        )
        rows.append(f"{scenario.label:24}{cells}")
    return "\n".join(rows)


# `--parts`: RunGuard built up a part at a time, each server one part more than the one before it.
PARTS = (
    ("the frame", "passthrough", "proxy_frame"),
    ("the detectors", "proxy_frame", "proxy_detectors"),
    ("the access log", "proxy_detectors", "proxy_logged"),
    ("the record store", "proxy_logged", "proxy"),
)


def _parts_table(scenarios: list[Scenario], counts: dict[str, dict[str, float]]) -> str:
    """Where RunGuard's instructions beyond the pass-through's go: each part's count (the difference of two
    servers) and its share of RunGuard's whole count."""
    head = f"{'scenario':24}" + "".join(f"{part:>22}{'share':>7}" for part, _, _ in PARTS)
    rows = ["what each part adds per request (its share of RunGuard's count)", head, "-" * len(head)]
    for scenario in scenarios:
        label = scenario.label
        whole = counts["proxy"][label]
        cells = ""
        for _, less, more in PARTS:
            added = counts[more][label] - counts[less][label]
            cells += f"{added:>22,.0f}{added / whole:>6.0%} "
        rows.append(f"{label:24}{cells}")
    return "\n".join(rows)


def _keep(tmp: Path, folder: Path) -> None:
    """Copy callgrind's dumps (`<server>.cg.<n>`) from the scratch folder to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for dumped in tmp.glob("*.cg.*"):
        shutil.copy2(dumped, folder / dumped.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", choices=(*APIS, "all"), default="all")
    parser.add_argument("--stream", action="store_true", help="streamed requests only (default: whole and streamed)")
    parser.add_argument(
        "--size", choices=(*SIZES, GROWTH), default="small", help="growth: one run growing a tool turn per request"
    )
    parser.add_argument("--response", choices=("tokens", "large"), help="the upstream's answer (default: a tool call)")
    parser.add_argument("--pace-ms", type=float, default=0.0, help="the upstream waits this long after every event")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--compare", type=Path, help="also count RunGuard from this checkout (e.g. a git worktree)")
    parser.add_argument(
        "--parts",
        action="store_true",
        help="also count RunGuard without its store and access log, and without its store: what each part adds",
    )
    parser.add_argument("--keep", type=Path, help="copy callgrind's dumps to this folder (for callgrind_annotate)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    apis: tuple[Api, ...] = APIS if args.api == "all" else (args.api,)
    streams = (True,) if args.stream else (False, True)
    response = args.response or ""
    scenarios = [Scenario(api, stream, args.size, response, args.pace_ms) for api in apis for stream in streams]
    with tempfile.TemporaryDirectory(prefix="runguard-servers-") as scratch, Services(Path(scratch)) as services:
        tmp = Path(scratch)
        upstream = services.start_announcing("upstream", [sys.executable, "-m", "bench.upstream"], cwd=ROOT).url
        servers = {"passthrough": _start_passthrough(services, tmp, upstream)}
        servers["proxy_frame"] = _start_proxy(services, tmp, upstream, "proxy_frame", True, None)
        servers["proxy"] = _start_proxy(services, tmp, upstream, "proxy", False, None)
        if args.parts:
            servers["proxy_detectors"] = _start_proxy(
                services, tmp, upstream, "proxy_detectors", False, None, records=False, access_log=False
            )
            servers["proxy_logged"] = _start_proxy(services, tmp, upstream, "proxy_logged", False, None, records=False)
        if args.compare:
            servers["proxy_before"] = _start_proxy(services, tmp, upstream, "proxy_before", False, args.compare)
        print(f"instructions per request of each server, {args.requests} requests per scenario after {WARMUP}")
        with ThreadPoolExecutor(max_workers=len(servers)) as pool:  # a count does not depend on the load
            measuring = {
                name: pool.submit(_measure, server, scenarios, args.requests) for name, server in servers.items()
            }
            counts = {name: done.result() for name, done in measuring.items()}
        if args.keep:
            _keep(tmp, args.keep)
    print(_table(scenarios, counts))
    if args.parts:
        print(_parts_table(scenarios, counts))


if __name__ == "__main__":
    main()
