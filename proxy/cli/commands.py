"""Registers the command groups beyond `serve` on the CLI, in help order."""

from __future__ import annotations

import typer

from runguard.proxy.cli import admin as cli_admin
from runguard.proxy.cli import config as cli_config
from runguard.proxy.cli import detectors as cli_detectors
from runguard.proxy.cli import keys as cli_keys
from runguard.proxy.cli import replay as cli_replay
from runguard.proxy.cli import show as cli_show
from runguard.proxy.cli import store as cli_store


def register(app: typer.Typer) -> None:
    """Add every command module's commands to `app` (explicit list, in help order)."""
    cli_store.register(app)
    cli_show.register(app)
    cli_replay.register(app)
    cli_admin.register(app)
    cli_config.register(app)
    cli_detectors.register(app)
    cli_keys.register(app)
