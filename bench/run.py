"""One command for the whole benchmark: `python -m bench.run [--quick]` (see bench/README.md).

Starts the fake upstream, the baselines (minimal aiohttp pass-through, nginx
when installed, LiteLLM with `--litellm VENV`) and RunGuard (`runguard-proxy serve`, plus a Redis-backed one
once `proxy/state/redis.py` exists and Redis answers), runs the scenarios,
writes `bench/results/<timestamp>.json` and prints the figures with their
ratios to the baselines. Everything binds 127.0.0.1, every phase is bounded in
requests and seconds, and every process started here is stopped by its pid.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py`: import `bench` from the repository root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import datetime
import importlib.util
import os
import platform
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict
from typing import Any

import orjson

from bench import litellm, nginx, options, payloads, probes, procs, proxy_setup, report, stages, summary
from bench.procs import CpuSample, LoadProcess, ProcessFailed, Service, Services

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
REDIS_URL = "redis://127.0.0.1:6379/0"
TOKENS_PACE_MS = 1  # between the deltas of the "tokens" stream scenarios
BACK_TO_BACK = 10  # stalled streams sent to one target in a row in the warm-cache variant of the stall scenario


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path, services: Services) -> None:
        self.args = args
        self.plan = options.plan(args)
        self.tmp = tmp
        self.services = services
        self.targets: dict[str, Service | None] = {}  # name -> process (None: direct to the upstream)
        self.notes: list[str] = []
        self.results: dict[str, Any] = {
            "latency": [],
            "stall": [],
            "throughput": [],
            "growth": [],
            "soak": None,
            "state_size": None,
        }
        self.redis_prefix = f"rg-bench-{uuid.uuid4().hex[:10]}"
        self.unguarded_only: set[str] = set()  # proxies that fail on guarded paths (adapters not there yet)
        self.openai_only: set[str] = set()  # baselines that serve no Gemini scenario (LiteLLM)
        self.multi_process: set[str] = set()  # `serve --workers N`: its metrics are one worker's

    # -- processes ---------------------------------------------------------------------------------------

    def start(self) -> None:
        py = sys.executable
        self.upstream = self.services.start_announcing("upstream", [py, "-m", "bench.upstream"], cwd=ROOT)
        self.targets["direct"] = None
        self.targets["passthrough"] = self.services.start_announcing(
            "passthrough", [py, "-m", "bench.passthrough", "--upstream", self.upstream.url], cwd=ROOT
        )
        self.targets["floor"] = self.services.start_announcing(
            "floor", [py, "-m", "bench.floor", "--upstream", self.upstream.url], cwd=ROOT
        )
        if self.args.no_nginx or nginx.binary() is None:
            self.notes.append("nginx baseline skipped: " + ("--no-nginx" if self.args.no_nginx else "not installed"))
        else:
            port = procs.free_port()
            cmd = nginx.command(self.tmp / "nginx", port, self.upstream.port)
            self.targets["nginx"] = self.services.start_http("nginx", cmd, port, health="/v1/models")
        self._start_litellm()
        proxy = self._start_proxy("proxy")
        if proxy is not None:
            self.targets["proxy"] = proxy
        if self.args.frame:
            frame = self._start_proxy("proxy_frame", frame=True)
            if frame is not None:
                self.targets["proxy_frame"] = frame
        if self.args.compare:
            before = self._start_proxy("proxy_before", source=self.args.compare)
            if before is not None:
                self.targets["proxy_before"] = before
        if self._redis_ready():
            # With --compare, the other checkout on Redis too (its own key prefix: the two share no state).
            on_redis: list[tuple[str, Path | None]] = [("proxy_redis", None)]
            if self.args.compare:
                on_redis.append(("proxy_redis_before", self.args.compare))
            for name, source in on_redis:
                redis_proxy = self._start_proxy(name, state_url=REDIS_URL, source=source)
                if redis_proxy is not None:
                    self.targets[name] = redis_proxy
            if self.args.workers > 1:
                name = f"proxy_redis_x{self.args.workers}"
                workers = self._start_proxy(name, state_url=REDIS_URL, workers=self.args.workers)
                if workers is not None:
                    self.targets[name] = workers
                    self.multi_process.add(name)

    def _start_litellm(self) -> None:
        venv: Path | None = self.args.litellm
        if venv is None:
            self.notes.append("LiteLLM baseline skipped (optional: --litellm VENV, see bench/litellm.py).")
            return
        port = procs.free_port()
        config = litellm.write_config(self.tmp / "litellm.yaml", self.upstream.url)
        try:
            self.targets["litellm"] = self.services.start_http(
                "litellm",
                litellm.command(venv, config, port),
                port,
                health=litellm.HEALTH,
                env=litellm.environment(),
                cwd=self.tmp,
                timeout=litellm.START_TIMEOUT,
            )
        except (ProcessFailed, FileNotFoundError) as exc:
            self.notes.append(f"LiteLLM did not start: {str(exc).strip().splitlines()[-1]}")
            return
        self.openai_only.add("litellm")
        self.notes.append("LiteLLM serves the OpenAI scenarios only (its Gemini routes need its database).")

    def _start_proxy(
        self,
        name: str,
        state_url: str | None = None,
        max_runs: int | None = None,
        frame: bool = False,
        source: Path | None = None,
        database_url: str | None = None,
        workers: int = 1,
    ) -> Service | None:
        """A proxy target; `source`: run the code of that checkout (another commit) instead of this one."""
        try:
            service = proxy_setup.start_proxy(
                self.services,
                self.tmp,
                self.upstream.url,
                name,
                frame=frame,
                max_runs=max_runs,
                source=source,
                state_url=state_url,
                database_url=database_url,
                workers=workers,
                # under redis_prefix: cleanup_redis finds it
                key_prefix=f"{self.redis_prefix}-{name}" if state_url else None,
            )
        except (ProcessFailed, FileNotFoundError) as exc:
            lines = str(exc).strip().splitlines() or [""]
            reason = next((line for line in reversed(lines) if "Error" in line), lines[-1])
            self.notes.append(f"{name} did not start: {reason.strip()}")
            return None
        problem = self._guarded_problem(service)
        if problem:
            self.notes.append(f"{name} fails on guarded paths ({problem}); only the GET /v1/models row measures it")
            self.unguarded_only.add(name)
        return service

    def _redis_ready(self) -> bool:
        if self.args.no_redis:
            self.notes.append("Redis backend skipped: --no-redis")
            return False
        if importlib.util.find_spec("runguard.proxy.state.redis") is None:
            self.notes.append("Redis backend skipped: proxy/state/redis.py does not exist yet")
            return False
        try:
            import redis

            redis.Redis.from_url(REDIS_URL, socket_timeout=1.0).ping()
        except Exception as exc:
            self.notes.append(f"Redis backend skipped: no Redis at {REDIS_URL} ({type(exc).__name__})")
            return False
        return True

    def _guarded_problem(self, service: Service) -> str | None:
        """Why one small guarded request fails through this proxy, or None if it answers 200."""
        body = payloads.scenario_request("chat", False, "small")
        headers = {**payloads.request_headers("chat"), "X-Run-Id": f"check-{uuid.uuid4().hex[:8]}"}
        request = urllib.request.Request(
            service.url + payloads.request_path("chat", False), data=body, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10.0) as response:
                return None if response.status == 200 else f"status {response.status}"
        except urllib.error.HTTPError as exc:
            return f"status {exc.code}: {exc.read()[:160]!r}"
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"

    def cleanup_redis(self) -> None:
        if not {"proxy_redis", "proxy_redis_before"} & self.targets.keys():
            return
        try:
            import redis

            client = redis.Redis.from_url(REDIS_URL, socket_timeout=2.0)
            keys = list(client.scan_iter(match=f"{self.redis_prefix}*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start : start + 500])
        except Exception as exc:
            self.notes.append(f"could not remove the bench's Redis keys ({self.redis_prefix}*): {exc}")

    # -- running load ------------------------------------------------------------------------------------

    def _target_specs(self, names: list[str]) -> list[dict[str, Any]]:
        out = []
        for name in names:
            service = self.targets[name]
            url = self.upstream.url if service is None else service.url
            out.append({"name": name, "url": url, "pid": service.pid if service else None})
        return out

    def _measured(
        self, spec: dict[str, Any], names: list[str], timeout: float, drain: bool = False, probe: float = 0.0
    ) -> dict[str, Any]:
        """Run one load process; CPU of every target process between its ready and done.

        `drain` (a phase of thousands of requests): the phase ends when each proxy's record store
        has written everything, so a store that falls behind pays for its backlog in its own phase,
        not in the next target's. A short phase does not poll (each poll costs the proxy a request).
        `probe` (seconds of load): time admin reads (`/runguard/runs`) on each proxy while it is under load.
        Each single-process proxy's stage seconds (`bench/stages.py`) are scraped just before the first
        CPU sample and just after the second, so the scrapes cost the phase nothing.
        """
        spec = {**spec, "targets": self._target_specs(names)}
        load = LoadProcess(spec, self.tmp / "load.log", ROOT, sys.executable)
        try:
            event = load.next_event(timeout)
            services = {n: s for n in names if (s := self.targets[n]) is not None}
            # A scrape of `serve --workers N` reads one worker: no split for those.
            split = {n: s for n, s in services.items() if n.startswith("proxy") and n not in self.multi_process}
            marks_before = {n: stages.scrape(s.url) for n, s in split.items()}
            before = {n: CpuSample.of(s.pid) for n, s in services.items()}
            load.go()
            admin = {n: probes.admin_reads(s, probe) for n, s in services.items()} if probe else {}
            event = load.next_event(timeout)
            time.sleep(0.2)  # work a server does after answering (records, logs) belongs to the phase
            if drain:
                for service in services.values():
                    probes.drained(service)
            after = {n: CpuSample.of(s.pid) for n, s in services.items()}
            marks_after = {n: stages.scrape(s.url) for n, s in split.items()}
        finally:
            load.kill()
            load.close()
        result: dict[str, Any] = event["result"]
        for name, figures in result["targets"].items():
            if name in before:
                figures.update(procs.cpu_per_request(before[name], after[name], figures["n"]))
            if name in marks_before:
                figures["stages_us"] = stages.per_request(marks_before[name], marks_after[name], figures["n"])
            if admin.get(name):
                figures["admin_read_ms"] = statistics.median(admin[name])
        return result

    def guarded_targets(self, api: str = "chat") -> list[str]:
        """The targets that serve `api`'s guarded scenarios."""
        return [
            name
            for name in self.targets
            if name not in self.unguarded_only and not (api == "gemini" and name in self.openai_only)
        ]

    def latency(self) -> None:
        plan = self.plan
        rows: list[tuple[str, dict[str, Any]]] = [
            (
                "models GET (unguarded)",
                {"method": "GET", "path": "/v1/models", "warmup": plan.small_warmup, "count": plan.small_rounds},
            )
        ]
        for api in payloads.APIS:
            for stream in (False, True):
                for size in ("small", "large"):
                    warm, count = (
                        (plan.small_warmup, plan.small_rounds)
                        if size == "small"
                        else (plan.large_warmup, plan.large_rounds)
                    )
                    label = f"{api} {'stream' if stream else 'whole'} {size} req"
                    rows.append((label, {"api": api, "stream": stream, "size": size, "warmup": warm, "count": count}))
        for api in ("chat", "gemini"):
            for stream in (False, True):
                label = f"{api} {'stream' if stream else 'whole'} large resp"
                rows.append(
                    (
                        label,
                        {
                            "api": api,
                            "stream": stream,
                            "size": "small",
                            "response": "large",
                            "warmup": plan.large_warmup,
                            "count": plan.large_rounds,
                        },
                    )
                )
        for api in payloads.APIS:
            # A model's pace: ~250 small deltas, one every TOKENS_PACE_MS, each arriving alone.
            spec = {
                "api": api,
                "stream": True,
                "size": "small",
                "response": "tokens",
                "pace_ms": TOKENS_PACE_MS,
                "warmup": 2,
                "count": plan.tokens_rounds,
            }
            rows.append((f"{api} stream tokens resp", spec))
        for label, spec in rows:
            names = list(self.targets) if spec.get("method") == "GET" else self.guarded_targets(str(spec["api"]))
            result = self._measured(
                {"mode": "sequential", "run_prefix": f"lat-{uuid.uuid4().hex[:6]}", **spec}, names, timeout=600
            )
            self.results["latency"].append({"scenario": label, "spec": spec, **result})
            report.progress(f"latency  {label}")

    def stall(self) -> None:
        """Each API's stalled stream, interleaved as every scenario is; then the chat one back to back.

        Back to back (`BACK_TO_BACK` requests in a row to one target, 5 ms apart so that the
        previous request's tail work is done) each server finds the caches as its own previous
        request left them: the gap between the two rows is what cold caches cost a server, which
        an interleaved run (and a sidecar between an agent's steps) pays.
        """
        for api, block in [*((api, 1) for api in payloads.APIS), ("chat", BACK_TO_BACK)]:
            spec = {
                "mode": "sequential",
                "api": api,
                "stream": True,
                "size": "small",
                "stall_ms": self.plan.stall_ms,
                "warmup": 3 if block == 1 else block,
                "count": self.plan.stall_rounds,
                "block": block,
                "pause_ms": 0 if block == 1 else 5,
                "run_prefix": f"stall-{uuid.uuid4().hex[:6]}",
            }
            result = self._measured(spec, self.guarded_targets(api), timeout=600)
            scenario = f"{api} stream, first event then {self.plan.stall_ms} ms"
            if block > 1:
                scenario += f", {block} in a row"
            self.results["stall"].append({"scenario": scenario, "spec": spec, **result})
            report.progress(f"stall    {api}{' back to back' if block > 1 else ''}")

    def throughput(self) -> None:
        """Each target alone under each number of clients (16, 32); the rounds alternate targets, the
        median round is kept. The admin reads are timed at the most clients only (they are the same reads)."""
        for clients in self.plan.concurrencies:
            for stream in (False, True):
                scenario = f"chat {'stream' if stream else 'whole'} small"
                rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in self.guarded_targets()}
                for _ in range(self.plan.throughput_rounds):
                    for name, figures in rounds.items():
                        figures.append(self._loaded(name, stream, clients))
                        report.progress(f"throughput {name} {scenario}, {clients} clients")
                for name, figures in rounds.items():
                    middle = sorted(figures, key=lambda f: f["rps"])[len(figures) // 2]
                    self.results["throughput"].append(
                        {
                            "scenario": scenario,
                            "target": name,
                            "concurrency": clients,
                            **middle,
                            "rounds_rps": [f["rps"] for f in figures],
                        }
                    )

    def _loaded(self, name: str, stream: bool, clients: int) -> dict[str, Any]:
        """One throughput phase: `clients` keep-alive clients on target `name` alone."""
        spec = {
            "mode": "concurrent",
            "api": "chat",
            "stream": stream,
            "size": "small",
            "concurrency": clients,
            "duration": self.plan.throughput_s,
            "warmup_s": 0.5,
            "run_prefix": f"tp-{uuid.uuid4().hex[:6]}",
        }
        probe = self.plan.throughput_s if clients == max(self.plan.concurrencies) else 0.0
        result = self._measured(spec, [name], timeout=120 + self.plan.throughput_s, drain=True, probe=probe)
        figures: dict[str, Any] = result["targets"][name]
        return figures

    def growth(self) -> None:
        names = [n for n in self.guarded_targets() if n not in ("nginx", "litellm")]
        for api in self.plan.growth_apis:
            spec = {
                "mode": "growth",
                "api": api,
                "stream": False,
                "steps": self.plan.growth_steps,
                "run_prefix": f"growth-{uuid.uuid4().hex[:6]}",
            }
            load = LoadProcess(
                {**spec, "targets": self._target_specs(names)}, self.tmp / "load.log", ROOT, sys.executable
            )
            try:
                load.next_event(120)
                load.go()
                result = load.next_event(900)["result"]
            finally:
                load.kill()
                load.close()
            unhealthy = _unhealthy(result["steps"])
            self.results["growth"].append(
                {"api": api, **result, "fits": report.growth_fits(result["steps"]), "unhealthy": unhealthy}
            )
            for name, n in unhealthy.items():
                # Its CPU slope then measures block answers, not a growing run: say so where it cannot be missed.
                warning = f"growth run {api}: {n} of {len(result['steps'])} requests answered by RunGuard or failed"
                warning += f" through {name}: its slope is not a measure (raise the limit in bench/proxy_setup.py)"
                self.notes.append("WARNING: " + warning)
                report.progress("!" * 20 + " WARNING: " + warning + " " + "!" * 20)
            report.progress(f"growth   {api}")

    def state_size(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "bench.state_size",
            "--upstream",
            self.upstream.url,
            "--api",
            "chat",
            "--steps",
            str(self.plan.growth_steps),
        ]
        try:
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=600, check=True)
            self.results["state_size"] = orjson.loads(done.stdout.splitlines()[-1])
        except (subprocess.SubprocessError, IndexError, orjson.JSONDecodeError) as exc:
            stderr = getattr(exc, "stderr", b"") or b""
            self.notes.append(f"state size run failed: {type(exc).__name__} {stderr.decode(errors='replace')[-300:]}")
        report.progress("state size")

    def soak(self) -> None:
        plan = self.plan
        proxy = self._start_proxy("proxy_soak", max_runs=plan.soak_max_runs, database_url=self.args.soak_database_url)
        if proxy is None or "proxy_soak" in self.unguarded_only:
            return
        spec = {
            "mode": "soak",
            "count": plan.soak_requests,
            "checkpoint_every": plan.soak_every,
            "concurrency": plan.soak_concurrency,
            "run_prefix": f"soak-{uuid.uuid4().hex[:6]}",
            "targets": [{"name": "proxy_soak", "url": proxy.url, "pid": proxy.pid}],
        }
        load = LoadProcess(spec, self.tmp / "load.log", ROOT, sys.executable)
        samples: list[dict[str, Any]] = []
        started = time.monotonic()
        try:
            while True:
                event = load.next_event(900)
                if event["event"] != "checkpoint":
                    break
                samples.append(
                    {
                        "requests": event["done"],
                        "rss_mb": procs.rss_bytes(proxy.pid) / 2**20,
                        "seconds": time.monotonic() - started,
                        **probes.store_gauges(proxy),
                    }
                )
                load.go()
        finally:
            load.kill()
            load.close()
            self.services.stop(proxy)
        self.results["soak"] = {
            "max_runs": plan.soak_max_runs,
            "samples": samples,
            "runs": plan.soak_requests // 4,
            **event.get("result", {}),
        }
        report.progress("soak")

    def run(self) -> dict[str, Any]:
        self.start()
        wanted = set(self.args.only or ["latency", "stall", "throughput", "growth", "state", "soak"])
        steps = [
            ("latency", self.latency),
            ("stall", self.stall),
            ("throughput", self.throughput),
            ("growth", self.growth),
            ("state", self.state_size),
            ("soak", self.soak),
        ]
        try:
            for name, step in steps:
                if name in wanted:
                    step()
        finally:
            self.cleanup_redis()
        return self.results


def _unhealthy(steps: list[dict[str, Any]]) -> dict[str, int]:
    """Per target, the growth run's requests not answered 200 by the upstream (a trip, a block, an error)."""
    counts: dict[str, int] = {}
    for step in steps:
        for name, figures in step["targets"].items():
            if figures["status"] != 200 or figures.get("trip"):
                counts[name] = counts.get(name, 0) + 1
    return counts


def _meta(args: argparse.Namespace, plan: options.Plan) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    loadavg = Path("/proc/loadavg").read_text().split()[:3]
    return {
        "mode": "quick" if args.quick else "full",
        "plan": asdict(plan),
        "commit": commit.stdout.strip(),
        "python": platform.python_version(),
        "cpus": len(os.sched_getaffinity(0)),
        "loadavg_at_start": loadavg,
        "started": datetime.datetime.now(datetime.UTC).isoformat(),
    }


def main() -> None:
    args = options.parse()
    meta = _meta(args, options.plan(args))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="runguard-bench-") as tmp, Services(Path(tmp)) as services:
        bench = Bench(args, Path(tmp), services)
        try:
            results = bench.run()
        finally:
            services.stop_all()
    meta["seconds"] = time.monotonic() - started
    document = {"meta": meta, "notes": bench.notes, **results}
    document["summary_md"] = summary.markdown(document)
    out = args.out or RESULTS / f"{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    if args.md:
        args.md.write_text(document["summary_md"], encoding="utf-8")
    sys.stdout.write(report.render(document) + f"\nresults: {out}\n")


if __name__ == "__main__":
    main()
