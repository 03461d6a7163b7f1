"""Helpers of the CLI's read-command tests: the CLI run in-process (`invoke`) or as the user runs it
(`cli`), and the store the tests read, filled by real traffic (`fill_by_traffic`) or by the writer
(`fill_by_writer`).

`fill_by_traffic`: the openai SDK through the proxy (bodies recorded) to a scripted upstream; then one
more run through a proxy that records no bodies.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import openai
import orjson
from click.testing import Result
from typer.testing import CliRunner

from runguard.proxy.cli.main import new_app
from tests.e2e import agents
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory
from tests.support.processes import console_script
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream

T0 = factory.T0
LOOP = "loop-0123456789abcdef-0123456789abcdef"  # longer than rich would keep in a squeezed column
BOLD = "[bold]x[/bold]"  # client-chosen ids that rich would read as markup
LINK = "[link=https://example.com/]y[/link]:smile:"
PLAIN = "plain-run"  # recorded without bodies


async def invoke(*args: str, url: str, width: int | None = None) -> Result:
    """The CLI in-process, as `runguard-proxy ARGS` with the store at `url` and COLUMNS=`width`."""
    env: dict[str, str | None] = {name: None for name in os.environ if name.startswith("RUNGUARD_")}
    env.update({"RUNGUARD_DATABASE_URL": url, "COLUMNS": str(width) if width else None})
    return await asyncio.to_thread(CliRunner().invoke, new_app(), list(args), env=env)


async def agent_run(base_url: str, run_id: str, key: str, tool: agents.Tool) -> None:
    sdk = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, default_headers={"X-Run-Id": run_id})
    try:
        await agents.chat_agent(sdk, tool)
    except openai.RateLimitError:
        pass  # the loop was stopped
    finally:
        await sdk.close()


@dataclass
class Filled:
    url: str
    keys: dict[str, str]  # run id -> its key hash


async def fill_by_traffic(store_url: str, upstream: FakeUpstream) -> Filled:
    """Four runs through the real proxy: LOOP (stopped), BOLD and LINK (recorded bodies), PLAIN (none)."""
    upstream.script = agents.chat_script(steps=4)
    recording = settings_for(upstream.url, store={"database_url": store_url, "record_bodies": True})
    running = await start_proxy(recording)
    try:
        await agent_run(f"{running.url}/v1", LOOP, "sk-loop-key", agents.soft_error_tool)
        await agent_run(f"{running.url}/v1", BOLD, "sk-other-key", agents.progressing_tool)
        await agent_run(f"{running.url}/v1", LINK, "sk-other-key", agents.progressing_tool)
    finally:
        await running.stop()
    running = await start_proxy(settings_for(upstream.url, store={"database_url": store_url}))
    try:
        await agent_run(f"{running.url}/v1", PLAIN, "sk-other-key", agents.progressing_tool)
    finally:
        await running.stop()
    listed = await invoke("runs", "--json", url=store_url)
    assert listed.exit_code == 0, listed.output
    return Filled(store_url, {run["run_id"]: run["key_hash"] for run in orjson.loads(listed.stdout)})


async def cli(*args: str, database_url: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`runguard-proxy ARGS` as a user runs it (a process), with the store at `database_url` if given."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("RUNGUARD_")}
    if database_url is not None:
        env["RUNGUARD_DATABASE_URL"] = database_url
    return await asyncio.to_thread(
        subprocess.run, [console_script(), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


async def fill_by_writer(make_sink: SinkFactory) -> None:
    """Two runs written straight to the store: cli-loop (stopped by non_progress at request 4), cli-ok."""
    sink = make_sink()
    for i in range(1, 4):
        sink.submit(factory.request("cli-loop", i, at=T0 + i, verdicts=(factory.verdict(),) if i == 3 else ()))
    sink.submit(factory.trip("cli-loop", at=T0 + 3.5))
    sink.submit(factory.request("cli-loop", 4, at=T0 + 4, blocked_by="non_progress", status=429, usd=0.0))
    sink.submit(factory.request("cli-ok", 1, at=T0 + 10, agent="writer"))
    sink.submit(factory.request("cli-ok", 2, at=T0 + 11, tool_calls=(), finish_reason="stop"))
    await sink.flush()
