"""Orchestrator side: starting bench processes, reading their CPU and memory from /proc, stopping them.

Every process is started by us, with its output in a log file, and stopped
by its own pid (SIGTERM, then SIGKILL after a grace period). CPU is read two
ways: utime+stime of /proc/<pid>/stat (whole process, 10 ms ticks) and the
sum of /proc/<pid>/task/*/schedstat (nanoseconds, live threads only); a phase
uses the ticks when it burned enough CPU to make them precise, else schedstat.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

CLK_TCK = os.sysconf("SC_CLK_TCK")
STAT_PRECISE_SECONDS = 0.5  # at 10 ms a tick, a phase this long is within 2%


class ProcessFailed(RuntimeError):
    """A bench process died or did not come up in time."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_stat_seconds(pid: int) -> float:
    """utime+stime of the whole process (exited threads included)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_sched_seconds(pid: int) -> float:
    """Run time of the process's live threads, from schedstat (nanosecond resolution)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass(frozen=True, slots=True)
class CpuSample:
    stat: float
    sched: float

    @classmethod
    def of(cls, pid: int) -> CpuSample:
        """The process and its live children (the workers of `serve --workers N`; single processes have none)."""
        pids = [pid, *children(pid)]
        return cls(sum(map(cpu_stat_seconds, pids)), sum(map(cpu_sched_seconds, pids)))


def children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def cpu_per_request(before: CpuSample, after: CpuSample, requests: int) -> dict[str, Any]:
    """Microseconds of CPU per request over a phase, from the more precise source."""
    stat, sched = after.stat - before.stat, after.sched - before.sched
    use_stat = stat >= STAT_PRECISE_SECONDS or sched <= 0
    best = stat if use_stat else sched
    n = max(requests, 1)
    return {
        "cpu_us": best / n * 1e6,
        "cpu_us_stat": stat / n * 1e6,
        "cpu_us_sched": sched / n * 1e6,
        "cpu_source": "stat" if use_stat else "schedstat",
        "cpu_seconds": best,
    }


@dataclass
class Service:
    name: str
    popen: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Services:
    """The processes of one bench run; `stop_all()` (also on exit of `with`) ends each by its pid."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[Service] = []

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None, cwd: Path | None) -> Service:
        log = self.log_dir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd
            )
        service = Service(name, popen, 0, log)
        self.started.append(service)
        return service

    def start_announcing(
        self,
        name: str,
        cmd: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 20.0,
    ) -> Service:
        """Start a bench server that prints the `{"ready": true, "port": N}` line."""
        service = self._spawn(name, cmd, env, cwd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in service.log.read_bytes().splitlines():
                if line.startswith(b'{"ready"'):
                    service.port = int(orjson.loads(line)["port"])
                    return service
            if not service.alive():
                raise ProcessFailed(f"{name} exited:\n{service.log_tail()}")
            time.sleep(0.05)
        raise ProcessFailed(f"{name} did not start within {timeout}s:\n{service.log_tail()}")

    def start_http(
        self,
        name: str,
        cmd: list[str],
        port: int,
        *,
        health: str = "/",
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 30.0,
    ) -> Service:
        """Start a server on a known port and wait until `health` answers at all."""
        service = self._spawn(name, cmd, env, cwd)
        service.port = port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not service.alive():
                raise ProcessFailed(f"{name} exited:\n{service.log_tail()}")
            try:
                with urllib.request.urlopen(service.url + health, timeout=1.0):
                    return service
            except urllib.error.HTTPError:
                return service  # it answered
            except OSError:
                time.sleep(0.1)
        raise ProcessFailed(f"{name} did not answer {health} within {timeout}s:\n{service.log_tail()}")

    def stop(self, service: Service, grace: float = 5.0) -> None:
        if service.alive():
            with contextlib.suppress(ProcessLookupError):
                service.popen.send_signal(signal.SIGTERM)
            try:
                service.popen.wait(grace)
            except subprocess.TimeoutExpired:
                service.popen.kill()
                service.popen.wait(5.0)
        if service in self.started:
            self.started.remove(service)

    def stop_all(self) -> None:
        for service in reversed(list(self.started)):
            self.stop(service)


class LoadProcess:
    """One `bench.load` client process, driven line by line (ready / checkpoint -> go, then done)."""

    def __init__(self, spec: dict[str, Any], log: Path, cwd: Path, python: str) -> None:
        self._stderr = log.open("ab")
        self.popen = subprocess.Popen(
            [python, "-m", "bench.load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, cwd=cwd
        )
        assert self.popen.stdin is not None
        self.popen.stdin.write(orjson.dumps(spec) + b"\n")
        self.popen.stdin.flush()
        self._buffer = b""

    def next_event(self, timeout: float) -> dict[str, Any]:
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ProcessFailed(f"load client gave no answer within {timeout:.0f}s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.popen.wait(5.0)
                    raise ProcessFailed(f"load client exited with {self.popen.returncode} (see {self._stderr.name})")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        event: dict[str, Any] = orjson.loads(line)
        return event

    def go(self) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(b"go\n")
        self.popen.stdin.flush()

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(5.0)

    def close(self) -> None:
        try:
            self.popen.wait(10.0)
        except subprocess.TimeoutExpired:
            self.kill()
        self._stderr.close()
