"""`runguard-proxy config show | check`: the effective configuration and where it came from."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import orjson
import typer
from pydantic import BaseModel, SecretStr

from runguard.config import Settings
from runguard.proxy.cli.loading import load
from runguard.proxy.cli.render import Column, console, echo_json, print_fitted

HIDDEN = "********"


def _shown(value: Any, key: str = "") -> Any:
    """A value as `config show` prints it: secrets hidden, and so the password in a URL
    (store.database_url, state.url), which the rest of the URL still shows, and the path of
    a webhook URL (incoming-webhook URLs carry their secret there)."""
    if isinstance(value, SecretStr):
        return HIDDEN
    if isinstance(value, dict) and any(isinstance(item, BaseModel) for item in value.values()):
        # Models by name (`upstreams.compatible.<name>`): their fields, as a config file writes them.
        return {name: _shown(item, f"{key}.{name}") for name, item in value.items()}
    if isinstance(value, BaseModel):
        return {name: _shown(item, f"{key}.{name}") for name, item in value.model_dump(exclude_defaults=True).items()}
    if key == "alerts.webhooks":
        from runguard.proxy.observe import where

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


def _detector_rows(settings: Settings) -> list[tuple[str, Any, str]]:
    """Every detector's effective settings (`guard.detectors.<name>.<field>`, defaults included), then
    each override's settings as written (`guard.overrides.<i>.detectors.<name>.<field>`)."""
    from runguard.detectors.registry import default_detectors
    from runguard.proxy.guard import Policy

    effective = Policy(default_detectors(), settings.guard).effective("", "")
    rows: list[tuple[str, Any, str]] = []
    for name, config in effective.items():
        for field, info in type(config).model_fields.items():
            value = getattr(config, field)
            rows.append((f"guard.detectors.{name}.{field}", getattr(value, "value", value), info.description or ""))
    for i, override in enumerate(settings.guard.overrides):
        prefix = f"guard.overrides.{i}"
        rows += [(f"{prefix}.key", override.key, "API-key hash or label"), (f"{prefix}.model", override.model, "")]
        for name, values in override.detectors.items():
            rows += [(f"{prefix}.detectors.{name}.{field}", value, "") for field, value in values.items()]
    return rows


def _text(value: Any) -> str:
    """A value as JSON writes it (lists, strings and null as in a config file's JSON form)."""
    return orjson.dumps(value, default=str).decode() if not isinstance(value, str) else value


def _source(key: str, sources: dict[str, str]) -> str:
    if key in sources:
        return sources[key]
    nested = [src for dotted, src in sources.items() if dotted.startswith(key + ".")]
    parents = [sources[p] for p in (key.rsplit(".", n)[0] for n in range(1, key.count(".") + 1)) if p in sources]
    return nested[0] if nested else parents[0] if parents else "default"


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Show or check the configuration.", no_args_is_help=True)
    app.add_typer(group, name="config")

    @group.command("show")
    def show(
        config: Annotated[Path | None, typer.Option("--config", "-c", exists=True, help="YAML config file.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """The effective settings, every detector's included, with where each came from (cli, env, file, default).

        Piped, each setting is one line `key = value  (source)`, never cut to a width."""
        loaded = load(config)
        plain = [row for row in _rows(loaded.settings) if row[0] not in ("guard.detectors", "guard.overrides")]
        rows = [(k, v, d, _source(k, loaded.sources)) for k, v, d in [*plain, *_detector_rows(loaded.settings)]]
        if as_json:
            payload = [{"key": k, "value": v, "source": s, "description": d} for k, v, d, s in rows]
            echo_json(payload)
            return
        if not sys.stdout.isatty():  # piped: one whole line per key, never cut to a width
            for key, value, _, source in rows:
                typer.echo(f"{key} = {_text(value)}  ({source})")
            return
        columns = [
            Column("key", lambda r: r["key"], whole=True),
            Column("value", lambda r: r["value"], priority=100),
            Column("source", lambda r: r["source"], priority=90),
            Column("description", lambda r: r["description"], priority=80),
        ]
        out = console()
        shown = [{"key": k, "value": _text(v), "source": s, "description": d} for k, v, d, s in rows]
        print_fitted(out, columns, shown)

    @group.command("check")
    def check(file: Annotated[Path, typer.Argument(exists=True, help="YAML config file to validate.")]) -> None:
        """Validate a config file (detector settings included); exit 2 naming the bad key."""
        load(file)
        typer.echo(f"{file}: OK")
