"""`runguard-proxy config check` validates everything `serve` would read, naming the bad key; `show` hides secrets."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.support.processes import console_script

LOCAL = {"local": {"url": "http://vllm:8000/v1", "prices": {"qwen": {"input": 1.0, "output": 2.0}}}}


def check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), "config", "check", str(config)],
        check=False,
        env={**os.environ, "RUNGUARD_HOME": str(config.parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_sound_file_passes(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  my-model: {input: 1.0, output: 2.0}\n")
    config = tmp_path / "runguard.yaml"
    config.write_text(
        f"pricing_file: {prices}\nguard:\n  breaker: {{cooldown_seconds: 30, max_cooldown_seconds: 60}}\n"
    )
    checked = check(config)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == f"{config}: OK"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("pricing_file: {missing}\n", "pricing_file: cannot read {missing}"),
        ("models_file: {bad_table}\n", "models_file: {bad_table} must be a mapping of `models:`"),
        ("guard:\n  breaker: {{cooldown_seconds: 1000}}\n", "guard.breaker: Value error, cooldown_seconds (1000)"),
        ('runs:\n  run_header: ""\n', "runs.run_header: String should have at least 1 character"),
        (
            "upstreams:\n  compatible:\n    openai: {{url: http://127.0.0.1:9}}\n",
            "upstreams.compatible: Value error, upstreams.compatible.openai: the name 'openai' would shadow",
        ),
    ],
)
def test_a_bad_setting_fails_naming_it(content: str, message: str, tmp_path: Path) -> None:
    """Tables named by the file are read too: `check` passing means `serve` starts."""
    paths = {"missing": tmp_path / "missing.yaml", "bad_table": tmp_path / "windows.yaml"}
    paths["bad_table"].write_text("- gpt-4o\n")
    config = tmp_path / "runguard.yaml"
    config.write_text(content.format(**paths))
    checked = check(config)
    assert checked.returncode == 2
    assert f"invalid configuration: {message.format(**paths)}" in checked.stderr
    assert "Traceback" not in checked.stderr


def test_show_hides_the_passwords_in_urls_as_it_hides_the_admin_token(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "RUNGUARD_HOME": str(tmp_path),
        "RUNGUARD_ADMIN_TOKEN": "t0ken-s3cret",
        "RUNGUARD_DATABASE_URL": "postgresql+asyncpg://runguard:db-s3cret@db.internal:5432/records",
        "RUNGUARD_STATE_URL": "redis://:redis-s3cret@cache.internal:6379/0",
        "RUNGUARD_ALERTS__WEBHOOKS": '["https://hooks.slack.com/services/T0/B0/s3cret"]',
        "RUNGUARD_UPSTREAMS__COMPATIBLE": orjson.dumps(LOCAL).decode(),
    }
    shown = subprocess.run(
        [console_script(), "config", "show", "--json"],
        check=True,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "s3cret" not in shown.stdout
    values = {row["key"]: row["value"] for row in orjson.loads(shown.stdout)}
    assert values["store.database_url"] == "postgresql+asyncpg://runguard:********@db.internal:5432/records"
    assert values["state.url"] == "redis://:********@cache.internal:6379/0"
    assert values["server.admin_token"] == "********"
    assert values["alerts.webhooks"] == ["https://hooks.slack.com/********"]  # the secret is in the path
    assert values["upstreams.compatible"] == {
        "local": {"url": "http://vllm:8000", "prices": {"qwen": {"input": 1, "output": 2}}}
    }
