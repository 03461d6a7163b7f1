"""Registers the command groups beyond `serve` on the CLI."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add every command module's commands to `app` (explicit list, in help order)."""
    from runguard.proxy import cli_admin, cli_config, cli_detectors, cli_keys, cli_replay, cli_show, cli_store

    cli_store.register(app)
    cli_show.register(app)
    cli_replay.register(app)
    cli_admin.register(app)
    cli_config.register(app)
    cli_detectors.register(app)
    cli_keys.register(app)
