"""The LiteLLM proxy as an optional baseline, run from a virtual environment of its own.

    python3 -m venv /opt/litellm && /opt/litellm/bin/pip install 'litellm[proxy]'
    python -m bench.run --quick --litellm /opt/litellm

LiteLLM is what many teams put between their agents and their providers, so its
cost per request is the comparison users ask for. It is kept out of the
project's environment (it pins its own versions of half the ecosystem) and run
as it comes: one model routed to the fake upstream, a master key (it refuses to
start without one; it is the bench's own OpenAI key, so the load client's
requests authenticate unchanged), client `x-` headers forwarded (the fake
upstream reads the scenario from them), its default logging, no database. Its cost
map is read from the package (`LITELLM_LOCAL_MODEL_COST_MAP`): nothing is
fetched at start.

It serves the OpenAI scenarios (Chat Completions and Responses, whole and
streamed). Its Gemini-native routes authenticate the Gemini key against a
database it does not have here, so the Gemini rows leave it out. It does not
forward bytes: it parses each request, calls the upstream through its own
client and writes a new response, so its figures include that translation.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from bench.payloads import OPENAI_KEY, OPENAI_MODEL

HEALTH = "/health/liveliness"
START_TIMEOUT = 120.0  # seconds: it imports for a long while


def executable(venv: Path) -> Path:
    """The `litellm` command of `venv`; FileNotFoundError says how to install it."""
    found = venv / "bin" / "litellm"
    if not found.exists():
        raise FileNotFoundError(
            f"no litellm in {venv}: python3 -m venv {venv} && {venv}/bin/pip install 'litellm[proxy]'"
        )
    return found


def write_config(path: Path, upstream: str) -> Path:
    """One model, the bench's, routed to the fake upstream's OpenAI API."""
    config = {
        "model_list": [
            {
                "model_name": OPENAI_MODEL,
                "litellm_params": {
                    "model": f"openai/{OPENAI_MODEL}",
                    "api_base": f"{upstream.rstrip('/')}/v1",
                    "api_key": "sk-upstream-bench",
                },
            }
        ],
        # The scenario headers (x-bench-response, -pace-ms, -stall-ms) must reach the upstream.
        "general_settings": {"master_key": OPENAI_KEY, "forward_client_headers_to_llm_api": True},
        "litellm_settings": {"telemetry": False},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def command(venv: Path, config: Path, port: int) -> list[str]:
    return [str(executable(venv)), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]


def environment() -> dict[str, str]:
    """Ours, without LiteLLM settings inherited from the shell, and no cost-map download at start."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("LITELLM_")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env
