"""Every command module's commands are on the CLI, in help order: the store's read commands first, then
replay and export, the admin command, detectors and keys (typer lists the `config` group last)."""

from __future__ import annotations

import re

import typer

from runguard.proxy.cli.commands import register
from tests.proxy.cli.test_terminal import invoke


def test_register_adds_every_command_in_help_order() -> None:
    app = typer.Typer()
    register(app)
    names = [
        command.name or (command.callback.__name__ if command.callback else "") for command in app.registered_commands
    ]
    assert names == ["runs", "trips", "show", "replay", "export", "reset", "detectors", "key-hash"]
    assert [group.name for group in app.registered_groups] == ["config"]


def test_the_cli_lists_them_in_that_order_and_each_answers_help() -> None:
    listed = re.findall(r"^│ ([a-z][a-z-]*) ", invoke("--help", width=100).stdout, re.MULTILINE)
    order = ["serve", "runs", "trips", "show", "replay", "export", "reset", "detectors", "key-hash", "config"]
    assert listed == order
    for name in order:
        shown = invoke(name, "--help")
        assert shown.exit_code == 0 and "Usage:" in shown.stdout, name
