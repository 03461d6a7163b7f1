"""`runguard-proxy key-hash`: the hash RunGuard knows an API key by, for `runs.key_allowlist` and `runs.tenants`.

The key is read from standard input (never from the command line, where it would stay in the shell's
history and the process list), hashed with this install's salt (`runs.key_salt`, else the one in
RUNGUARD_HOME) as the proxy hashes it, and only the hash is printed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from runguard.proxy.cli.loading import load
from runguard.proxy.runs import KeyHasher, load_salt


def register(app: typer.Typer) -> None:
    @app.command("key-hash")
    def key_hash(
        config: Annotated[Path | None, typer.Option("--config", "-c", exists=True, help="YAML config file.")] = None,
    ) -> None:
        """Print the hash of each API key read from standard input, one key a line (as the proxy names it)."""
        settings = load(config).settings
        salt = load_salt(settings.runs.key_salt.get_secret_value() if settings.runs.key_salt else None)
        hasher = KeyHasher(salt)
        keys = [line.strip() for line in sys.stdin if line.strip()]
        if not keys:
            hint = "printenv OPENAI_API_KEY | runguard-proxy key-hash"
            typer.echo(f"runguard-proxy: no key on standard input (`{hint}`)", err=True)
            raise typer.Exit(2)
        for key in keys:
            typer.echo(hasher.hash(key))
