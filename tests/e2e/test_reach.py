"""Done when (#49): a Vertex AI Gemini run, a Claude-on-Vertex run and a run through a named compatible
upstream, each made by its real SDK through one proxy with a record store, show in `runguard-proxy runs`,
`show`, the dashboard and the records with their provider, their cost (or "unpriced") and their trips.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import httpx
import openai
import orjson
import pytest
import yaml
from google.genai import errors as genai_errors

from runguard.proxy.store import StoreReader
from tests.e2e.agents import chat_agent, chat_script, gemini_agent, gemini_script, soft_error_tool
from tests.e2e.vertex import CLAUDE_MODEL, GEMINI_MODEL, PROJECT, TOKEN, claude_client, gemini_client
from tests.proxy.cli.views import invoke
from tests.support.anthropic_upstream import Step, message
from tests.support.proxy import start_proxy
from tests.support.upstream import FakeUpstream, Received, Reply

GEMINI_RUN, CLAUDE_RUN, COMPAT_RUN = "vertex-gemini-loop", "vertex-claude-ok", "compat-unpriced-loop"


@pytest.fixture
async def local_llm() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream(chat_script(50)).start()
    yield fake
    await fake.stop()


def _vertex(received: Received) -> Reply:
    if "/publishers/anthropic/" in received.path:
        model = received.path.rpartition("/")[2].partition(":")[0]
        return Reply.json(message(Step(text="Claude on Vertex", usage=(40, 12)), "msg_reach", model))
    token = received.headers.get("Authorization", "").removeprefix("Bearer ")
    assert token == TOKEN and f"/projects/{PROJECT}/" in received.path
    return gemini_script(50, model=GEMINI_MODEL)(received)


async def test_vertex_and_compatible_runs_show_everywhere_with_provider_cost_and_trips(
    upstream: FakeUpstream, local_llm: FakeUpstream, tmp_path: Path
) -> None:
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'records.db'}"
    config = {
        "upstreams": {"others": {"vertex": upstream.url}, "compatible": {"local": {"url": local_llm.url}}},
        "runs": {"key_salt": "reach-salt"},
        "store": {"database_url": store_url, "flush_interval": 0.05},
    }
    config_file = tmp_path / "runguard.yaml"
    config_file.write_text(yaml.safe_dump(config))
    from runguard.config.loader import load_settings

    settings = load_settings(config_file=config_file, environ={}).settings
    running = await start_proxy(settings)
    upstream.script = _vertex
    try:
        with pytest.raises(genai_errors.ClientError):
            await gemini_agent(gemini_client(running.url, run=GEMINI_RUN), soft_error_tool, max_steps=20)
        claude = claude_client(running.url, run=CLAUDE_RUN)
        said = await claude.messages.create(
            model=CLAUDE_MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )
        assert said.content[0].type == "text"
        await claude.close()
        local = openai.AsyncOpenAI(
            base_url=f"{running.url}/local/v1", api_key="local-key", default_headers={"X-Run-Id": COMPAT_RUN}
        )
        with pytest.raises(openai.RateLimitError):
            await chat_agent(local, soft_error_tool, max_steps=20, model="qwen2.5-coder:7b")
        await local.close()
        await _stored(store_url, {GEMINI_RUN, CLAUDE_RUN, COMPAT_RUN})
        async with httpx.AsyncClient() as browser:  # the dashboard, from loopback
            listing = (await browser.get(f"{running.url}/runguard/ui/runs")).text
            page = (await browser.get(f"{running.url}/runguard/ui/runs/{COMPAT_RUN}")).text
    finally:
        await running.stop()

    done = await invoke("runs", "--json", "--config", str(config_file), url=store_url)
    assert done.exit_code == 0, done.output
    runs = {run["run_id"]: run for run in orjson.loads(done.stdout)}
    gemini, claude_run, compat = runs[GEMINI_RUN], runs[CLAUDE_RUN], runs[COMPAT_RUN]
    assert gemini["providers"] == ["vertex"] and gemini["usd"] > 0 and not gemini["unpriced"]
    assert gemini["status"] == "tripped:non_progress" and gemini["models"] == [GEMINI_MODEL]
    assert claude_run["providers"] == ["vertex"] and claude_run["models"] == [CLAUDE_MODEL] and claude_run["usd"] > 0
    assert compat["providers"] == ["local"] and compat["unpriced"] and compat["usd"] == 0
    assert compat["status"] == "tripped:non_progress"

    table = await invoke("runs", "--config", str(config_file), url=store_url, width=200)
    line = next(row for row in table.stdout.splitlines() if COMPAT_RUN in row)
    assert "unpriced" in line and "local" in line and "$0.0000" not in line
    shown = await invoke("show", COMPAT_RUN, "--config", str(config_file), url=store_url, width=200)
    assert "unpriced" in shown.stdout and "non_progress" in shown.stdout
    assert "spent so far unpriced, cost avoided (est.) unpriced" in shown.stdout  # the trip's, never $0

    assert all(name in listing for name in (GEMINI_RUN, CLAUDE_RUN, COMPAT_RUN, "vertex", "local", "unpriced"))
    assert "unpriced" in page and "non_progress" in page and "(local)" in page
    trip_facts = page.partition("spend so far")[2].partition("scope")[0]
    assert "unpriced" in trip_facts and "$" not in trip_facts


async def _stored(store_url: str, run_ids: set[str]) -> None:
    reader = StoreReader.open(store_url)
    try:
        for _ in range(200):
            runs = {run["run_id"]: run for run in await reader.runs.recent(10)}
            if run_ids <= set(runs) and runs[GEMINI_RUN]["trips"] and runs[COMPAT_RUN]["trips"]:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the store did not get the runs: {sorted(runs)}")
    finally:
        await reader.close()


_ = anthropic  # AnthropicVertex is the client `claude_client` makes
