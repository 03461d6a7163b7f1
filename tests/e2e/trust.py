"""Helpers for the trust-boundary tests: the real `runguard-proxy serve` with chosen settings, and the CLI."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.support.processes import ServeProcess, console_script, start_serve

CLEAN_ENV = ("RUNGUARD_ADMIN_TOKEN", "RUNGUARD_PROXY_URL", "RUNGUARD_CONFIG")


@asynccontextmanager
async def serving(
    tmp_path: Path, upstream_url: str, *args: str, env: dict[str, str] | None = None, **sections: dict[str, Any]
) -> AsyncIterator[ServeProcess]:
    """`runguard-proxy serve --config <file> *args` pointed at `upstream_url`, with `sections` in its config
    file (no record store unless a section names one); stopped on exit."""
    config: dict[str, Any] = {
        "upstreams": {"openai": upstream_url, "gemini": upstream_url},
        "runs": {"key_salt": "trust-test-salt"},
        "store": {"database_url": ""},
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    path = tmp_path / f"trust-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(yaml.safe_dump(config))
    served = await start_serve({"RUNGUARD_HOME": str(tmp_path), **(env or {})}, tmp_path, "--config", str(path), *args)
    try:
        yield served
    finally:
        await served.stop()


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`runguard-proxy *args` as a user runs it: exit code, stdout, stderr."""
    clean = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    process = await asyncio.create_subprocess_exec(
        console_script(),
        *args,
        env={**clean, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode if process.returncode is not None else -1, out.decode(), err.decode()
