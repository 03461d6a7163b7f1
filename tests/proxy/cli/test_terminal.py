"""The commands that read no store, as a terminal and a pipe show them: `--version`, `-h`, `config show`
with every detector's effective settings, whole keys when piped (`detectors` is in test_detectors)."""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

import orjson
from click.testing import Result
from typer.testing import CliRunner

from runguard.detectors.registry import DETECTOR_CLASSES
from runguard.proxy.cli.main import new_app

DOCS = Path(__file__).parents[3] / "docs"


def invoke(*args: str, width: int | None = None, home: Path | None = None) -> Result:
    env: dict[str, str | None] = {name: None for name in os.environ if name.startswith("RUNGUARD_")}
    env.update({"COLUMNS": str(width) if width else None, "RUNGUARD_HOME": str(home) if home else None})
    return CliRunner().invoke(new_app(), list(args), env=env)


def test_version_and_h() -> None:
    done = invoke("--version")
    assert done.exit_code == 0 and done.stdout.strip() == f"runguard-proxy {version('runguard-proxy')}"
    assert invoke("-h").stdout == invoke("--help").stdout
    assert "runs" in invoke("-h").stdout and "export" in invoke("-h").stdout
    shown = invoke("runs", "-h")
    assert shown.exit_code == 0 and "--status" in shown.stdout and "--since" in shown.stdout


def test_config_show_lists_every_detector_setting_whole_when_piped(tmp_path: Path) -> None:
    config = tmp_path / "runguard.yaml"
    config.write_text(
        "guard:\n  detectors: {spiral: {threshold: 0.8}}\n"
        "  overrides: [{model: 'gpt-4o*', detectors: {context_window: {warn_ratio: 0.6}}}]\n"
    )
    done = invoke("config", "show", "--config", str(config), width=80, home=tmp_path)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert f"guard.detectors.spiral.threshold = 0.8  (file:{config})" in lines
    assert "guard.detectors.spiral.window = 4  (default)" in lines
    assert "guard.detectors.context_window.warn_ratio = 0.7  (default)" in lines
    assert f"guard.overrides.0.detectors.context_window.warn_ratio = 0.6  (file:{config})" in lines
    assert "store.record_bodies = false  (default)" in lines
    for cls in DETECTOR_CLASSES:  # every field of every detector, keys whole even beyond 80 columns
        for field in cls.Config.model_fields:
            assert any(line.startswith(f"guard.detectors.{cls.name}.{field} = ") for line in lines), field

    rows = orjson.loads(invoke("config", "show", "--json", "--config", str(config), home=tmp_path).stdout)
    by_key = {row["key"]: row for row in rows}
    assert by_key["guard.detectors.spiral.threshold"]["value"] == 0.8
    assert by_key["guard.detectors.spiral.threshold"]["source"] == f"file:{config}"
    assert set(by_key["server.port"]) == {"key", "value", "source", "description"}
