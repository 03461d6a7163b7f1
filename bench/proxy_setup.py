"""How the bench runs RunGuard: every detector on with its defaults, except the limits healthy bench traffic reaches.

The limits raised, and why:
- `max_requests.limit`: the growth run is 300 requests of one run (default 100);
- `max_tokens.limit`, `budget.run_usd`: the growth run's input grows to ~78k
  tokens a request, ~12M tokens over 300 requests (defaults 2M tokens, $5);
- `spend_rate.run_usd_per_minute`: the growth run spends those ~$30 (gpt-4o's
  price) in the few seconds its 300 requests take, a pace of hundreds of dollars
  a minute (default $2.50): with the default, 236 of its 300 requests were answered
  429. Only the run limit is raised (the key limit stays off, its default), and the
  short scenarios, whose runs are one request each, never reach either;
- `tool_storm.threshold`: the growth run's agent calls its four tools in turn,
  each 75 times in 300 requests (default 8: a warning on 271 of its 300
  responses); the counting still runs, only the warning it reached is gone;
- `session_bloat.max_history_chars`: the "large" scenarios start each run
  with a 300 KB tool result (default 60k characters).
The same settings serve the subprocess (`runguard-proxy serve --config`) and
the in-process variants (`bench.state_size`, `bench.profile`).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from bench.procs import Service, Services, free_port

if TYPE_CHECKING:
    from runguard.config.settings import Settings

DETECTOR_LIMITS: dict[str, dict[str, Any]] = {
    "max_requests": {"limit": 1_000_000},
    "max_tokens": {"limit": 10_000_000_000},
    "budget": {"run_usd": 1_000_000.0},
    "spend_rate": {"run_usd_per_minute": 1_000_000.0},
    "tool_storm": {"threshold": 1_000_000},
    "session_bloat": {"max_history_chars": 100_000_000},
}


def config_data(max_runs: int | None = None, frame: bool = False, access_log: bool = True) -> dict[str, Any]:
    """The bench's settings; `frame`: every detector off, no access log (with no store, the proxy's bare frame);
    `access_log`: False turns the access log off with the detectors on."""
    data: dict[str, Any] = {"guard": {"detectors": DETECTOR_LIMITS}}
    if frame:
        from runguard.detectors.registry import DETECTOR_CLASSES

        data = {"guard": {"detectors": {cls.name: {"action": "off"} for cls in DETECTOR_CLASSES}}}
    if frame or not access_log:
        data["log"] = {"access_log": False}
    if max_runs is not None:
        data["runs"] = {"max_runs": max_runs}
    return data


def write_config(
    path: Path,
    max_runs: int | None = None,
    frame: bool = False,
    store: Mapping[str, Any] | None = None,
    access_log: bool = True,
) -> Path:
    """The bench's settings as a config file; `store`: record-store settings (e.g. its flush interval)."""
    data = config_data(max_runs, frame, access_log)
    if store:
        data["store"] = dict(store)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def proxy_command(config: Path, port: int, workers: int = 1) -> list[str]:
    """`runguard-proxy serve` from the venv this Python runs in (`workers`: its `--workers`)."""
    exe = Path(sys.executable).parent / "runguard-proxy"
    found = str(exe) if exe.exists() else shutil.which("runguard-proxy")
    if found is None:
        raise FileNotFoundError("runguard-proxy is not installed in this environment")
    command = [found, "serve", "--host", "127.0.0.1", "--port", str(port), "--config", str(config)]
    return [*command, "--workers", str(workers)] if workers > 1 else command


def source_path(checkout: Path, layout: Path) -> str:
    """PYTHONPATH that imports `runguard.*` from `checkout` (its proxy/, detectors/, config/) first."""
    package = layout / "runguard"
    package.mkdir(parents=True, exist_ok=True)
    for name in ("proxy", "detectors", "config"):
        link = package / name
        if not link.exists():
            link.symlink_to(checkout.resolve() / name, target_is_directory=True)
    return f"{layout}{os.pathsep}{checkout.resolve()}"


def start_proxy(
    services: Services,
    tmp: Path,
    upstream: str,
    name: str,
    *,
    frame: bool = False,
    max_runs: int | None = None,
    source: Path | None = None,
    state_url: str | None = None,
    key_prefix: str | None = None,
    store: Mapping[str, Any] | None = None,
    database_url: str | None = None,
    wrapper: Sequence[str] = (),
    timeout: float = 30.0,
    workers: int = 1,
    records: bool = True,
    access_log: bool = True,
) -> Service:
    """`runguard-proxy serve` as the bench target `name`, its config, home and SQLite file under `tmp`.

    `frame`: every detector off, no store; `records`, `access_log`: False turns the record store or the
    access log off with the detectors on (`bench.server_instructions --parts`); `source`: the code of
    another checkout; `state_url` and `key_prefix`: a shared state backend; `database_url`: the record
    store, instead of its own SQLite file; `wrapper`: a command the proxy runs under (valgrind).
    Returns once `/runguard/health` answers; ProcessFailed or FileNotFoundError if it does not start.
    """
    port = free_port()
    config = write_config(tmp / f"{name}.yaml", max_runs, frame, store, access_log)
    recorded = records and not frame
    env = proxy_env(upstream, tmp / f"home-{name}", tmp / f"{name}.db" if recorded else None, state_url, key_prefix)
    if database_url and recorded:
        env["RUNGUARD_DATABASE_URL"] = database_url
    if source is not None:
        env["PYTHONPATH"] = source_path(source, tmp / f"layout-{name}")
    command = [*wrapper, *proxy_command(config, port, workers)]
    return services.start_http(name, command, port, health="/runguard/health", env=env, cwd=tmp, timeout=timeout)


def proxy_env(
    upstream: str, home: Path, database: Path | None, state_url: str | None = None, key_prefix: str | None = None
) -> dict[str, str]:
    """The environment of one proxy process: ours only (no inherited RUNGUARD_* settings)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("RUNGUARD_")}
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "RUNGUARD_OPENAI_UPSTREAM": upstream,
            "RUNGUARD_GEMINI_UPSTREAM": upstream,
            "RUNGUARD_DATABASE_URL": f"sqlite+aiosqlite:///{database}" if database else "",
            "RUNGUARD_HOME": str(home),
        }
    )
    if state_url:
        env["RUNGUARD_STATE_URL"] = state_url
        env["RUNGUARD_STATE__KEY_PREFIX"] = key_prefix or "rg-bench"
    return env


def settings(upstream: str, max_runs: int | None = None, frame: bool = False, database: Path | None = None) -> Settings:
    """`Settings` for an in-process proxy with the bench's detector limits (imported late: the proxy may not build).

    Records go to `database` (a SQLite file) when given and not `frame`; otherwise nothing is recorded
    (never a `runguard.db` left in the working directory).
    """
    from runguard.config.settings import Settings

    data = config_data(max_runs, frame)
    data["store"] = {"database_url": f"sqlite+aiosqlite:///{database}" if database and not frame else ""}
    data["upstreams"] = {"openai": upstream, "gemini": upstream}
    data["runs"] = {**data.get("runs", {}), "key_salt": "bench-salt"}
    return Settings.model_validate(data)
