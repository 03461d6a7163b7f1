"""The `--config` option and the settings loader every command shares.

The lowest module of the command line (beside `render`): `main` and every
command module import it, it imports none of them, so `cli/` has no import
cycle. A configuration error ends any command the same way: its message, with
the bad key, on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runguard.config import ConfigError, LoadedSettings, load_settings

ConfigOption = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (also RUNGUARD_CONFIG).", exists=True)
]


def load(config: Path | None, cli: dict[str, Any] | None = None) -> LoadedSettings:
    """Settings from every layer, detector settings validated; exits with the key on error."""
    from runguard.detectors.registry import validate_config
    from runguard.proxy.guard import ModelTables

    try:
        loaded = load_settings(config_file=config, cli=cli, validate_detectors=validate_config)
        settings = loaded.settings
        if settings.pricing_file or settings.models_file:
            ModelTables(settings.pricing_file, settings.models_file)  # the user's tables are read here too
        return loaded
    except ConfigError as exc:
        typer.echo(f"runguard-proxy: invalid configuration: {exc}", err=True)
        raise typer.Exit(2) from exc
