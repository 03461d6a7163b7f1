"""`runguard-proxy serve` as a real process, the way a user (or a replica) runs it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

_LISTENING = re.compile(rb"listening on (http://\S+)")


def console_script() -> str:
    """The `runguard-proxy` entry point installed next to this interpreter."""
    return str(Path(sys.executable).with_name("runguard-proxy"))


@dataclass
class ServeProcess:
    process: asyncio.subprocess.Process
    url: str
    output: list[bytes] = field(default_factory=list)  # stdout and stderr lines, drained as they come
    stdout: list[bytes] = field(default_factory=list)  # the stdout lines alone (banner, access log)
    _drains: list[asyncio.Task[None]] = field(default_factory=list)

    async def stop(self, sig: int = signal.SIGTERM, wait_seconds: float = 15.0) -> int:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)
            try:
                await asyncio.wait_for(self.process.wait(), wait_seconds)
            except TimeoutError:
                self.output.append(f"[test harness] no exit {wait_seconds} s after signal {sig}: killed\n".encode())
                self.process.kill()
                await self.process.wait()
        await asyncio.gather(*self._drains, return_exceptions=True)
        return self.process.returncode if self.process.returncode is not None else -1

    def text(self) -> str:
        return b"".join(self.output).decode("utf-8", "replace")

    def diagnostics(self, lines: int = 40) -> str:
        """The process's own messages (record lines left out), last `lines` of them: for assertion messages."""
        said = [line for line in self.text().splitlines() if not line.startswith('{"ts"')]
        return "\n".join(said[-lines:])


async def _drain(stream: asyncio.StreamReader, into: list[bytes], also: list[bytes] | None = None) -> None:
    while line := await stream.readline():
        into.append(line)
        if also is not None:
            also.append(line)


async def start_serve(env: dict[str, str], cwd: Path, *args: str, wait_seconds: float = 30.0) -> ServeProcess:
    """Start `runguard-proxy serve --port 0 ...` and wait until it says where it listens."""
    process = await asyncio.create_subprocess_exec(
        console_script(),
        "serve",
        "--port",
        "0",
        *args,
        env={**os.environ, **env},
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    output: list[bytes] = []
    stdout: list[bytes] = []
    errors = asyncio.ensure_future(_drain(process.stderr, output))
    try:
        async with asyncio.timeout(wait_seconds):
            while True:
                line = await process.stdout.readline()
                if not line:
                    await errors
                    raise RuntimeError("runguard-proxy exited before listening:\n" + b"".join(output).decode())
                output.append(line)
                stdout.append(line)
                found = _LISTENING.search(line)
                if found:
                    break
    except BaseException:
        process.kill()
        await process.wait()
        raise
    served = ServeProcess(process, found.group(1).decode(), output, stdout)
    served._drains = [errors, asyncio.ensure_future(_drain(process.stdout, output, stdout))]
    return served
