"""The real `runguard-proxy serve` process with a YAML config of a test's choosing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.support.processes import ServeProcess, start_serve


def write_config(directory: Path, config: dict[str, Any]) -> Path:
    """`config` as a new YAML file in `directory`."""
    path = directory / f"runguard-{len(list(directory.glob('runguard-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@asynccontextmanager
async def serving(
    upstream_url: str, directory: Path, env: dict[str, str] | None = None, **sections: dict[str, Any]
) -> AsyncIterator[ServeProcess]:
    """`serve` in front of `upstream_url` (both providers), no record store, `sections` over that; stopped after."""
    config: dict[str, Any] = {
        "upstreams": {"openai": upstream_url, "gemini": upstream_url, **sections.pop("upstreams", {})},
        "runs": {"key_salt": "served-test-salt", **sections.pop("runs", {})},
        "store": {"database_url": "", **sections.pop("store", {})},
        **sections,
    }
    path = write_config(directory, config)
    served = await start_serve(env or {}, directory, "--config", str(path))
    try:
        yield served
    finally:
        await served.stop()
