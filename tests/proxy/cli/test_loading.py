"""`load`: every command's settings, with detector settings and the user's tables checked, or exit 2 naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from runguard.proxy.cli.loading import load


@pytest.fixture(autouse=True)
def _no_outside_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("RUNGUARD_CONFIG", "RUNGUARD_ADMIN_TOKEN", "RUNGUARD_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUNGUARD_HOME", str(tmp_path))


def test_the_file_and_the_command_line_both_count_and_the_command_line_wins(tmp_path: Path) -> None:
    config = tmp_path / "runguard.yaml"
    config.write_text("server:\n  port: 9001\n  host: 127.0.0.2\n")
    loaded = load(config, {"server.port": 9002, "server.host": None})  # None: the option was not given
    assert (loaded.settings.server.host, loaded.settings.server.port) == ("127.0.0.2", 9002)
    assert loaded.sources["server.port"] == "cli"
    assert loaded.sources["server.host"] == f"file:{config}"


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ("server:\n  port: nope\n", "server.port"),
        ("guard:\n  detectors:\n    spiral:\n      threshold: high\n", "guard.detectors.spiral.threshold"),
        ("pricing_file: {missing}\n", "pricing_file: cannot read"),
    ],
)
def test_a_bad_setting_exits_2_naming_it_on_stderr(
    content: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "runguard.yaml"
    config.write_text(content.format(missing=tmp_path / "missing.yaml"))
    with pytest.raises(typer.Exit) as ended:
        load(config)
    assert ended.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.startswith("runguard-proxy: invalid configuration: ")
    assert named in err
