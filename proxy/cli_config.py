"""`runguard-proxy config show | check`: the effective configuration and where it came from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import orjson
import typer
from pydantic import BaseModel, SecretStr

HIDDEN = "********"


def _shown(value: Any, key: str = "") -> Any:
    """A value as `config show` prints it: secrets hidden, and so the password in a URL
    (store.database_url, state.url), which the rest of the URL still shows, and the path of
    a webhook URL (incoming-webhook URLs carry their secret there)."""
    if isinstance(value, SecretStr):
        return HIDDEN
    if key == "alerts.webhooks":
        from runguard.proxy.alerts import where

        return tuple(f"{where(url)}/{HIDDEN}" for url in value)
    if isinstance(value, str) and "://" in value:
        parts = urlsplit(value)
        if parts.password:
            user, _, host = parts.netloc.rpartition("@")
            name = user.partition(":")[0]
            return parts._replace(netloc=f"{name}:{HIDDEN}@{host}").geturl()
    return value


def _rows(model: BaseModel, prefix: str = "") -> list[tuple[str, Any, str]]:
    rows: list[tuple[str, Any, str]] = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        key = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            rows += _rows(value, key + ".")
        else:
            rows.append((key, _shown(value, key), info.description or ""))
    return rows


def _source(key: str, sources: dict[str, str]) -> str:
    if key in sources:
        return sources[key]
    nested = [src for dotted, src in sources.items() if dotted.startswith(key + ".")]
    return nested[0] if nested else "default"


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Show or check the configuration.", no_args_is_help=True)
    app.add_typer(group, name="config")

    @group.command("show")
    def show(
        config: Annotated[Path | None, typer.Option("--config", "-c", exists=True, help="YAML config file.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """The effective settings, with where each value came from (cli, env, file, default)."""
        from rich.console import Console
        from rich.table import Table

        from runguard.proxy.cli import load

        loaded = load(config)
        rows = [(k, v, d, _source(k, loaded.sources)) for k, v, d in _rows(loaded.settings)]
        if as_json:
            payload = [{"key": k, "value": v, "source": s} for k, v, _, s in rows]
            typer.echo(orjson.dumps(payload, default=str, option=orjson.OPT_INDENT_2).decode())
            return
        table = Table("key", "value", "source", "description")
        for key, value, description, source in rows:
            table.add_row(key, str(value), source, description)
        Console().print(table)

    @group.command("check")
    def check(file: Annotated[Path, typer.Argument(exists=True, help="YAML config file to validate.")]) -> None:
        """Validate a config file (detector settings included); exit 2 naming the bad key."""
        from runguard.proxy.cli import load

        load(file)
        typer.echo(f"{file}: OK")
