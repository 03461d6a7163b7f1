"""`runguard-proxy serve` refuses a bad configuration with one clear line, no traceback; logs no webhook secret."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e import payloads
from tests.proxy.observe.test_alerts import Receiver, until
from tests.support.processes import console_script, start_serve
from tests.support.upstream import FakeUpstream, Reply


def refused_serve(env: dict[str, str], cwd: Path) -> str:
    """Run `serve` with `env` over the environment: it must stop with exit 2 and no traceback. Its stderr."""
    served = subprocess.run(
        [console_script(), "serve", "--port", "0"],
        check=False,
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 2, served.stderr
    assert "Traceback" not in served.stderr
    return served.stderr


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("RUNGUARD_DATABASE_URL", "mysql://x/y", "store.database_url"),
        ("RUNGUARD_STATE_URL", "http://x", "state.url"),
        ("RUNGUARD_OPENAI_UPSTREAM", "api.openai.com", "upstreams.openai"),
    ],
)
def test_a_bad_url_stops_serve_naming_the_key(variable: str, value: str, key: str, tmp_path: Path) -> None:
    stderr = refused_serve({variable: value, "RUNGUARD_HOME": str(tmp_path)}, tmp_path)
    assert f"invalid configuration: {key}" in stderr
    assert not list(tmp_path.iterdir())  # nothing created on the way out


@pytest.mark.parametrize("unreadable", ["RUNGUARD_CONFIG", "pricing_file"])
def test_a_file_that_cannot_be_read_stops_serve_naming_the_setting(unreadable: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    missing = tmp_path / "missing.yaml"
    config = tmp_path / "runguard.yaml"
    config.write_text(f"pricing_file: {missing}\n")
    env = {
        "RUNGUARD_CONFIG": str(missing if unreadable == "RUNGUARD_CONFIG" else config),
        "RUNGUARD_HOME": str(home),
        "RUNGUARD_DATABASE_URL": "",
    }
    assert f"invalid configuration: {unreadable}: cannot read {missing}" in refused_serve(env, home)


async def test_serve_never_logs_the_secret_in_a_webhook_url(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = lambda _: Reply.json(payloads.chat_completion())
    async with Receiver() as receiver:
        config = tmp_path / "runguard.yaml"
        config.write_text(
            f"alerts: {{webhooks: ['{receiver.url}']}}\n"
            "guard: {detectors: {max_requests: {limit: 1}}}\n"
            "log: {level: debug}\n"
        )
        env = {
            "RUNGUARD_OPENAI_UPSTREAM": upstream.url,
            "RUNGUARD_DATABASE_URL": "",
            "RUNGUARD_HOME": str(tmp_path),
        }
        served = await start_serve(env, tmp_path, "--config", str(config))
        try:
            async with httpx.AsyncClient(base_url=served.url) as http:
                headers = {"Authorization": "Bearer sk-test-webhook", "X-Run-Id": "r-hook"}
                body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "go"}]}
                assert (await http.post("/v1/chat/completions", json=body, headers=headers)).status_code == 200
                assert (await http.post("/v1/chat/completions", json=body, headers=headers)).status_code == 429
            await until(lambda: len(receiver.bodies) == 1)
        finally:
            await served.stop()
    assert receiver.bodies[0]["detector"] == "max_requests"
    assert "s3cr3t" not in served.text(), served.diagnostics()


def test_the_banner_and_the_help_name_every_provider_of_the_registry() -> None:
    from typer.testing import CliRunner

    from runguard.proxy.cli.main import _banner, new_app
    from tests.support.proxy import settings_for

    settings = settings_for("http://127.0.0.1:9", upstreams={"anthropic": "http://127.0.0.1:10"})
    banner = _banner(settings, "http://127.0.0.1:8787")
    assert "OpenAI upstream: http://127.0.0.1:9   (client base URL: http://127.0.0.1:8787/v1)" in banner
    assert "Gemini upstream: http://127.0.0.1:9   (client base URL: http://127.0.0.1:8787)" in banner
    assert "Anthropic upstream: http://127.0.0.1:10   (client base URL: http://127.0.0.1:8787)" in banner
    shown = " ".join(CliRunner().invoke(new_app(), ["--help"], env={"COLUMNS": "200"}).stdout.split())
    assert "A transparent proxy for the OpenAI, Gemini, Anthropic and Vertex AI APIs" in shown


def test_the_banner_says_when_the_c_kernel_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from runguard.detectors.support import normalize, shingles, sketch
    from runguard.proxy.cli.main import _banner
    from tests.support.proxy import settings_for

    settings = settings_for("http://127.0.0.1:9")
    monkeypatch.setattr(shingles, "_hashes_c", None)
    monkeypatch.setattr(normalize, "_strip_c", None)
    banner = _banner(settings, "http://127.0.0.1:8787")
    assert "the C shingle and sketch kernels are not built" in banner
    assert "the C volatile-text stripper is not built" in banner
    monkeypatch.setattr(shingles, "_hashes_c", shingles.hashes_py)  # any callables: as when they are built
    monkeypatch.setattr(shingles, "_units_c", shingles.units_of)
    monkeypatch.setattr(normalize, "_strip_c", str.upper)
    monkeypatch.setattr(sketch, "_sketch_c", None)  # the sketch alone missing (built apart): said too
    assert "the C shingle and sketch kernels are not built" in _banner(settings, "http://127.0.0.1:8787")
    monkeypatch.setattr(sketch, "_sketch_c", sketch._sketch_py)
    assert "not built" not in _banner(settings, "http://127.0.0.1:8787")
