"""The TypeScript clients and coding-agent CLIs of `tests/e2e/node/`, run as a user runs them, against the proxy.

They are installed with `npm ci` in `tests/e2e/node/` (its package-lock.json pins them). A test that needs
one calls `require_node()`: it skips with the reason when node or the packages are missing, except under
RUNGUARD_REQUIRE_SERVICES=1 (set by `.ci/run`), where it fails, as `tests/services.py` does for Redis.

Every client runs without network: its base URL is the proxy's, its key fake, its update checks, telemetry
and analytics off, its home a fresh temporary folder.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parent / "node"
MODULES = NODE_DIR / "node_modules"
CODEX = MODULES / "@openai" / "codex" / "bin" / "codex.js"
CLAUDE = MODULES / "@anthropic-ai" / "claude-code-linux-x64" / "claude"  # the native build its wrapper runs
KEY = "sk-runguard-e2e-fake"


def require_node(*needed: Path) -> str:
    """The node binary, or skip (fail under RUNGUARD_REQUIRE_SERVICES=1) when it or a `needed` file is missing."""
    node = shutil.which("node")
    missing = [str(path) for path in needed if not path.exists()]
    reason = None
    if node is None:
        reason = "node is not installed"
    elif missing:
        reason = f"{', '.join(missing)} missing (npm ci in {NODE_DIR})"
    if reason is None and node is not None:
        return node
    if os.environ.get("RUNGUARD_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}, and RUNGUARD_REQUIRE_SERVICES=1 requires it")
    pytest.skip(reason or "node missing")


@dataclass
class Ran:
    """What a client printed and how it ended."""

    code: int
    out: str
    err: str
    seconds: float

    @property
    def printed(self) -> str:
        return self.out + self.err


async def run(argv: list[str], *, env: dict[str, str], cwd: Path, within: float = 30.0) -> Ran:
    """Run a client to its end (killed after `within` seconds), its stdin closed; the test's loop keeps serving."""
    began = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), within)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        raise AssertionError(f"{argv[:2]} still running after {within} s: {err.decode()[-2000:]}") from None
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"), time.monotonic() - began)


def offline_env(home: Path, **more: str) -> dict[str, str]:
    """A client's environment: the system's PATH, a fresh HOME, nothing of the caller's keys or config."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", **more}


def codex_home(home: Path, proxy_url: str, *, websockets: bool = False) -> dict[str, str]:
    """A CODEX_HOME whose config sends every request to the proxy's Responses API with a fake key; with
    `websockets`, over Responses WebSockets (the provider's `supports_websockets`), as codex does with OpenAI."""
    codex = home / "codex"
    codex.mkdir(parents=True, exist_ok=True)
    (codex / "config.toml").write_text(
        'model = "gpt-5"\n'
        'model_provider = "runguard"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\nenabled = false\n"
        "[feedback]\nenabled = false\n"
        "[model_providers.runguard]\n"
        'name = "RunGuard"\n'
        f'base_url = "{proxy_url}/v1"\n'
        'env_key = "RUNGUARD_E2E_KEY"\n'
        'wire_api = "responses"\n' + ("supports_websockets = true\n" if websockets else "")
    )
    return offline_env(home, CODEX_HOME=str(codex), RUNGUARD_E2E_KEY=KEY)


async def codex_exec(node: str, env: dict[str, str], cwd: Path, task: str) -> Ran:
    """`codex exec TASK` in `cwd`, as a user starts a non-interactive session."""
    return await run([node, str(CODEX), "exec", "--skip-git-repo-check", task], env=env, cwd=cwd)


async def claude_print(proxy_url: str, home: Path, prompt: str) -> Ran:
    """`claude -p PROMPT` (Claude Code's non-interactive mode) on the proxy, with a fake key and no telemetry,
    error reporting, auto-update or other traffic of its own."""
    env = offline_env(
        home / "claude",
        ANTHROPIC_BASE_URL=proxy_url,
        ANTHROPIC_API_KEY=KEY,
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    return await run([str(CLAUDE), "-p", prompt], env=env, cwd=home)
