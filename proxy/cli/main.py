"""The `runguard-proxy` command line.

`serve` runs the proxy; the other commands read the record store or talk to a
running proxy's admin API. Each command group lives in its own module and is
registered here, through `commands`' list. The shape has no import cycle: `main`
imports the command modules, and they import only `loading` and `render`
below them, never `main`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Annotated, Any

import typer

from runguard.config import ConfigError, Settings
from runguard.proxy.cli import commands
from runguard.proxy.cli.loading import ConfigOption, load


def bind_warning(settings: Settings) -> str | None:
    """The warning `serve` prints when it binds beyond loopback without an admin token (admin API off)."""
    from runguard.proxy.admin.api import is_loopback

    if is_loopback(settings.server.host) or settings.server.admin_token is not None:
        return None
    return (
        f"warning: bound to {settings.server.host} without an admin token: the admin API is disabled "
        "(set server.admin_token / RUNGUARD_ADMIN_TOKEN to enable it)"
    )


def configure_logging(level: str) -> None:
    """The proxy's own messages on stderr at `level`, key-shaped text masked; the libraries it uses stay
    quiet below warnings.

    httpx (the webhook client) logs every request's full URL at info, and an
    incoming-webhook URL carries its secret in the path: it logs only warnings, whatever `level`.
    """
    from runguard.proxy.runs import RedactingFormatter

    handler = logging.StreamHandler()  # stderr
    handler.setFormatter(RedactingFormatter("%(message)s"))  # a key quoted by any library is masked
    logging.basicConfig(level=level.upper(), handlers=[handler])
    quiet = max(logging.WARNING, logging.getLogger().level)
    logging.getLogger("alembic").setLevel(quiet)  # migration chatter
    logging.getLogger("httpx").setLevel(quiet)


def _banner(settings: Settings, url: str) -> str:
    """What `serve` prints at start: each provider of the registry with its upstream and the base URL its
    clients set, then where state and records live, and which C kernels are missing."""
    from runguard.detectors.support import normalize, shingles, sketch
    from runguard.proxy.providers import registry

    state = "redis" if settings.state.shared else "in-memory"
    upstreams = settings.upstreams
    lines = [f"RunGuard proxy listening on {url}"]
    for provider in registry.REGISTRY.providers:
        upstream = upstreams.base_url(provider.upstream.name, provider.upstream.default_url)
        lines.append(f"  {provider.display} upstream: {upstream}   (client base URL: {url}{provider.client_path})")
    lines.append(
        f"  state: {state}   records: {settings.store.database_url.split('://')[0]}"
        f"{'   SHADOW MODE: nothing is blocked' if settings.guard.shadow else ''}"
    )
    if not (shingles.compiled() and sketch.compiled()):
        lines.append(
            "  the C shingle and sketch kernels are not built: their Python twins run, slower (apt-get install "
            "libxxhash-dev, then pip install the package again)"
        )
    if not normalize.stripper_compiled():
        lines.append("  the C volatile-text stripper is not built (no C compiler at install): the regex runs, slower")
    return "\n".join(lines)


async def _serve(settings: Settings, reuse_port: bool = False) -> None:
    from runguard.proxy.serve import collector
    from runguard.proxy.serve.app import create_app
    from runguard.proxy.serve.server import start
    from runguard.proxy.serve.timeouts import ClientTimeouts

    app = create_app(settings)
    server = settings.server
    timeouts = ClientTimeouts.of(server)
    running = await start(app, server.host, server.port, server.shutdown_grace_seconds, timeouts, reuse_port)
    collector.settle()
    typer.echo(_banner(settings, running.url), err=True)  # stdout carries the JSON access log alone
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    typer.echo("RunGuard proxy shutting down: draining in-flight requests", err=True)
    await running.stop()


def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default 8787).")] = None,
    config: ConfigOption = None,
    shadow: Annotated[bool | None, typer.Option("--shadow/--no-shadow", help="Warn only, never block.")] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Processes serving the port (SO_REUSEPORT); above 1 needs Redis state.")
    ] = 1,
) -> None:
    """Run the proxy."""
    loaded = load(config, {"server.host": host, "server.port": port, "guard.shadow": shadow})
    settings = loaded.settings
    configure_logging(settings.log.level)
    warning = bind_warning(settings)
    if warning is not None:
        typer.echo(warning, err=True)
    try:
        if workers > 1:
            raise typer.Exit(_serve_workers(settings, workers))
        _run(_serve(settings))
    except ConfigError as exc:
        typer.echo(f"runguard-proxy: invalid configuration: {exc}", err=True)
        raise typer.Exit(2) from exc
    except OSError as exc:  # the port is taken, the database or Redis is unreachable at start
        typer.echo(f"runguard-proxy: cannot start: {exc}", err=True)
        raise typer.Exit(1) from exc


def _serve_workers(settings: Settings, count: int) -> int:
    from runguard.proxy.serve.workers import WorkersRefused, serve_workers

    try:
        return serve_workers(settings, count, lambda each: _run(_serve(each, reuse_port=True)))
    except WorkersRefused as exc:
        typer.echo(f"runguard-proxy: {exc}", err=True)
        return 2


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on uvloop when it is installed, else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        typer.echo(f"runguard-proxy {version('runguard-proxy')}")
        raise typer.Exit()


def _top(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """A transparent proxy for AI provider APIs that stops runaway AI agents."""


def new_app() -> typer.Typer:
    """The whole command line: `serve` and every command group, with `--version` and `-h`/`--help`."""
    app = typer.Typer(
        name="runguard-proxy",
        no_args_is_help=True,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    from runguard.proxy.providers import registry

    app.callback(help=f"A transparent proxy for the {registry.provider_titles()} APIs that stops runaway AI agents.")(
        _top
    )
    app.command()(serve)
    commands.register(app)
    return app


def main() -> None:
    new_app()()


if __name__ == "__main__":
    main()
