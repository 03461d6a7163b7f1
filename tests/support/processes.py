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


async def _drain(
    stream: asyncio.StreamReader,
    into: list[bytes],
    also: list[bytes] | None = None,
    listening: asyncio.Future[str] | None = None,
) -> None:
    while line := await stream.readline():
        into.append(line)
        if also is not None:
            also.append(line)
        if listening is not None and not listening.done() and (found := _LISTENING.search(line)):
            listening.set_result(found.group(1).decode())


async def start_serve(env: dict[str, str], cwd: Path, *args: str, wait_seconds: float = 30.0) -> ServeProcess:
    """Start `runguard-proxy serve --port 0 ...` and wait until it says where it listens (on stderr)."""
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
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    drains = [
        asyncio.ensure_future(_drain(process.stderr, output, listening=listening)),
        asyncio.ensure_future(_drain(process.stdout, output, stdout, listening)),
    ]
    exited = asyncio.ensure_future(process.wait())
    try:
        async with asyncio.timeout(wait_seconds):
            await asyncio.wait({listening, exited}, return_when=asyncio.FIRST_COMPLETED)
        if not listening.done():
            await asyncio.gather(*drains)
            raise RuntimeError("runguard-proxy exited before listening:\n" + b"".join(output).decode())
    except BaseException:
        exited.cancel()
        if process.returncode is None:
            process.kill()
        await process.wait()
        raise
    exited.cancel()
    served = ServeProcess(process, listening.result(), output, stdout)
    served._drains = drains
    return served
