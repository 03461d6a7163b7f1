"""`runguard-proxy serve` refuses a bad configuration with one clear line, no traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import console_script


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("RUNGUARD_DATABASE_URL", "mysql://x/y", "store.database_url"),
        ("RUNGUARD_STATE_URL", "http://x", "state.url"),
        ("RUNGUARD_OPENAI_UPSTREAM", "api.openai.com", "upstreams.openai"),
    ],
)
def test_a_bad_url_stops_serve_naming_the_key(variable: str, value: str, key: str, tmp_path: Path) -> None:
    served = subprocess.run(
        [console_script(), "serve", "--port", "0"],
        check=False,
        env={**os.environ, variable: value, "RUNGUARD_HOME": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 2
    assert f"invalid configuration: {key}" in served.stderr
    assert "Traceback" not in served.stderr
    assert not list(tmp_path.iterdir())  # nothing created on the way out


@pytest.mark.parametrize("unreadable", ["RUNGUARD_CONFIG", "pricing_file"])
def test_a_file_that_cannot_be_read_stops_serve_naming_the_setting(unreadable: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    missing = tmp_path / "missing.yaml"
    config = tmp_path / "runguard.yaml"
    config.write_text(f"pricing_file: {missing}\n")
    served = subprocess.run(
        [console_script(), "serve", "--port", "0"],
        check=False,
        env={
            **os.environ,
            "RUNGUARD_CONFIG": str(missing if unreadable == "RUNGUARD_CONFIG" else config),
            "RUNGUARD_HOME": str(home),
            "RUNGUARD_DATABASE_URL": "",
        },
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 2
    assert f"invalid configuration: {unreadable}: cannot read {missing}" in served.stderr
    assert "Traceback" not in served.stderr
