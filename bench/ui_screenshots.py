"""Screenshots of every dashboard page, for the docs: `python -m bench.ui_screenshots [--out docs/screenshots]`.

Starts the real proxy in-process with a temporary SQLite store (bodies
recorded) in front of the tests' fake upstream, sends traffic through it with
the openai SDK (healthy runs that finish, runaways stopped by `non_progress`,
on two API keys and two models), then opens each page in headless Chromium
(the Debian packages, as the browser tests use them) and saves a PNG of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
from pathlib import Path

import openai

from runguard.proxy.serve.server import Running
from tests.e2e import agents
from tests.support.browser import chromium, chromium_missing
from tests.support.dashboard import start_dashboard_proxy
from tests.support.upstream import FakeUpstream

SHOTS = {
    "overview": "",
    "runs": "runs",
    "run": "runs/invoice-agent-loop",
    "trips": "trips",
    "keys": "keys",
    "detectors": "detectors",
}


async def traffic(running: Running, upstream: FakeUpstream) -> None:
    for n, (key, model) in enumerate([("sk-team-research-01", "gpt-4o-mini"), ("sk-team-billing-002", "gpt-4o")] * 3):
        client = openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key=key, max_retries=0,
                                    default_headers={"X-Run-Id": f"report-writer-{n}"})  # fmt: skip
        upstream.script = agents.chat_script(steps=2 + n % 3, usage=(1200 * (n + 1), 300))
        await agents.chat_agent(client, agents.progressing_tool, model=model)
        await client.close()
    for name, key in (("invoice-agent-loop", "sk-team-billing-002"), ("crawler-retry-loop", "sk-team-research-01")):
        client = openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key=key, max_retries=0,
                                    default_headers={"X-Run-Id": name})  # fmt: skip
        upstream.script = agents.chat_script(steps=50, usage=(4000, 400))
        with contextlib.suppress(openai.RateLimitError):  # the runaway is stopped: that is the point
            await agents.chat_agent(client, agents.soft_error_tool, model="gpt-4o")
        await client.close()
    await asyncio.sleep(0.5)  # the store's writer flushes every 50 ms


def shoot(base: str, out: Path) -> None:
    with chromium(1280, 860) as driver:
        for name, page in SHOTS.items():
            driver.set_window_size(1280, 1700 if name == "run" else 860)
            driver.get(f"{base}/runguard/ui/{page}")
            driver.save_screenshot(str(out / f"{name}.png"))
            print(f"{out / name}.png")


async def main(out: Path) -> None:
    missing = chromium_missing()
    if missing:
        raise SystemExit(missing)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    upstream = await FakeUpstream().start()
    with tempfile.TemporaryDirectory() as tmp:
        guard = {
            "detectors": {"budget": {"key_daily_usd": 0.05}},
            "overrides": [
                {"model": "gpt-4o", "detectors": {"budget": {"run_usd": 1.0}, "tool_storm": {"threshold": 5}}}
            ],
        }
        running = await start_dashboard_proxy(upstream, f"sqlite+aiosqlite:///{tmp}/shots.db", guard=guard)
        try:
            await traffic(running, upstream)
            await asyncio.to_thread(shoot, running.url, out)
        finally:
            await running.stop()
            await upstream.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    asyncio.run(main(parser.parse_args().out))
