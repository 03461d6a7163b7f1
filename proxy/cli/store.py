"""`runguard-proxy runs | trips`: the record store, read from the command line.

The commands read the database the proxy writes (`store.database_url` from
`--config`, `RUNGUARD_DATABASE_URL` or the default), print tables that fit
the terminal (see `cli_render`), or JSON with `--json` for scripts. They never
create a database: a SQLite file that does not exist is reported, not made.
`show` lives in `cli_show`, `replay` and `export` in `cli_replay`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from runguard.config import Settings
from runguard.proxy.cli.loading import ConfigOption, load
from runguard.proxy.cli.render import Column, ago, console, echo_json, fail, print_fitted, since, usd, when
from runguard.proxy.guard import spend

if TYPE_CHECKING:
    from runguard.proxy.store import StoreReader

T = TypeVar("T")


class RunStatus(enum.StrEnum):
    """A run's state as `--status` names it (`tripped` matches every `tripped: <detector>`)."""

    running = "running"
    idle = "idle"
    completed = "completed"
    tripped = "tripped"
    error = "error"


JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output (stable field names).")]
SinceOption = Annotated[
    str | None,
    typer.Option("--since", help="Only what happened since: a span (30m, 1h, 2d, 1w) or an ISO date (2026-11-28)."),
]


def read_store(settings: Settings, query: Callable[[StoreReader], Awaitable[T]]) -> T:
    """Run `query(reader)` against the configured store; exits with a message when it cannot."""
    from runguard.proxy.store import StoreMissing, StoreReader

    url = settings.store.database_url
    if not url:
        raise fail("no record store is configured (store.database_url / RUNGUARD_DATABASE_URL is empty)")
    try:
        reader = StoreReader.open(url, idle_seconds=settings.runs.idle_seconds)
    except (StoreMissing, ValueError) as exc:
        raise fail(str(exc)) from exc

    async def run() -> T:
        try:
            return await query(reader)
        finally:
            await reader.close()

    try:
        return asyncio.run(run())
    except (typer.Exit, BrokenPipeError):  # a closed pipe (`export | head`): click ends quietly
        raise
    except Exception as exc:
        raise fail(f"cannot read the record store: {exc}") from exc


def _status(run: dict[str, Any]) -> str:
    return str(run["status"]).replace(":", ": ")  # `tripped: spiral` may wrap after the colon


def run_columns(now: float) -> list[Column]:
    """The runs list's columns, most important first; the run id is never cut. A run with requests to a model
    that has no price shows its spend as unpriced, never as $0."""

    def spent(r: dict[str, Any]) -> str:
        return spend(r["usd"], r["unpriced"])

    return [
        Column("run", lambda r: r["run_id"], whole=True),
        Column("status", _status, priority=100),
        Column("USD", spent, priority=90, right=True, one_line=True),
        Column("key", lambda r: r["key_hash"], priority=80),
        Column("req", lambda r: str(r["requests"]), priority=70, right=True, one_line=True),
        Column("seen", lambda r: ago(r["last_seen"], now), priority=60, one_line=True),
        Column("agents", lambda r: ", ".join(r["agents"]), priority=50),
        Column("model", lambda r: ", ".join(r.get("models", ())), priority=40),
        Column("provider", lambda r: ", ".join(r.get("providers", ())), priority=35),
        Column(
            "tokens in/out",
            lambda r: f"{r['input_tokens']}/{r['output_tokens']}",
            priority=30,
            right=True,
            one_line=True,
        ),
        Column(
            "avoided",
            lambda r: spend(r["usd_avoided"], r["unpriced"]) if r["trips"] else "",
            priority=20,
            right=True,
            one_line=True,
        ),
        Column("duration", lambda r: f"{r['duration_s']:.1f}s", priority=10, right=True, one_line=True),
        Column("started", lambda r: when(r["first_seen"]), priority=5, one_line=True),
    ]


def register(app: typer.Typer) -> None:
    @app.command()
    def runs(
        limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs (newest first).")] = 20,
        status: Annotated[RunStatus | None, typer.Option("--status", help="Only runs in this state.")] = None,
        key: Annotated[str | None, typer.Option("--key", help="Only runs of this API-key hash (k_...).")] = None,
        detector: Annotated[
            str | None, typer.Option("--detector", help="Only runs this detector tripped or warned.")
        ] = None,
        since_text: SinceOption = None,
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """Recent runs, newest first: status, spend, key, requests, agents, model. Run ids are never cut."""
        import time

        from runguard.proxy.store import RunFilter

        now = time.time()
        found = RunFilter(
            status=status.value if status else None, key=key, detector=detector, since=since(since_text, now)
        )

        async def query(reader: StoreReader) -> list[dict[str, Any]]:
            return (await reader.runs.page(found, per_page=limit)).rows

        rows = read_store(load(config).settings, query)
        if as_json:
            echo_json(rows)
            return
        if not rows:
            typer.echo("no runs match" if found != RunFilter() else "no runs recorded yet")
            return
        out = console()
        print_fitted(out, run_columns(now), rows)

    @app.command()
    def trips(
        since_text: SinceOption = None,
        since_hours: Annotated[
            float | None, typer.Option("--since-hours", min=0, help="Only trips of the last N hours.")
        ] = None,
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """Trips by detector: how often each tripped or warned, in how many runs, and the cost it avoided."""
        import time

        now = time.time()
        start = (
            since(since_text, now) if since_text else (now - since_hours * 3600 if since_hours is not None else None)
        )
        rows = read_store(load(config).settings, lambda reader: reader.trips.by_detector(start))
        if as_json:
            echo_json(rows)
            return
        if not rows:
            typer.echo("no trips recorded")
            return
        columns = [
            Column("detector", lambda r: r["detector"], whole=True),
            Column("trips", lambda r: str(r["trips"]), priority=100, right=True, one_line=True),
            Column("warnings", lambda r: str(r["warnings"]), priority=90, right=True, one_line=True),
            Column("runs", lambda r: str(r["runs"]), priority=80, right=True, one_line=True),
            Column("USD avoided (est.)", lambda r: usd(r["usd_avoided"]), priority=70, right=True, one_line=True),
            Column("last", lambda r: when(r["last_at"]), priority=60, one_line=True),
        ]
        out = console()
        print_fitted(out, columns, rows)
