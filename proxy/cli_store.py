"""`runguard-proxy runs | show | trips | replay`: the record store, read from the command line.

The commands read the database the proxy writes (`store.database_url` from
`--config`, `RUNGUARD_DATABASE_URL` or the default), print rich tables, or
JSON with `--json` for scripts. They never create a database: a SQLite file
that does not exist is reported, not made.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import orjson
import typer

from runguard.config.settings import Settings
from runguard.proxy.cli import ConfigOption, load

T = TypeVar("T")

JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"runguard-proxy: {message}", err=True)
    return typer.Exit(code)


def _echo_json(payload: Any) -> None:
    typer.echo(orjson.dumps(payload, default=str, option=orjson.OPT_INDENT_2).decode())


def _read(settings: Settings, query: Callable[[Any], Awaitable[T]]) -> T:
    """Run `query(reader)` against the configured store; exits with a message when it cannot."""
    from runguard.proxy.store import StoreMissing, StoreReader

    url = settings.store.database_url
    if not url:
        raise _fail("no record store is configured (store.database_url / RUNGUARD_DATABASE_URL is empty)")
    try:
        reader = StoreReader.open(url, idle_seconds=settings.runs.idle_seconds)
    except (StoreMissing, ValueError) as exc:
        raise _fail(str(exc)) from exc

    async def run() -> T:
        try:
            return await query(reader)
        finally:
            await reader.close()

    try:
        return asyncio.run(run())
    except Exception as exc:
        raise _fail(f"cannot read the record store: {exc}") from exc


def _console() -> Any:
    """A rich console; piped output gets a wide page instead of rich's 80 columns."""
    import sys

    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def _time(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


def _usd(value: float | None) -> str:
    return f"${value or 0.0:.4f}"


def _runs_table(runs: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table("run", "status", "requests", "agents", "tokens in/out", "USD", "avoided", "last seen", "duration")
    for run in runs:
        table.add_row(
            run["run_id"],
            run["status"],
            str(run["requests"]),
            ", ".join(run["agents"]),
            f"{run['input_tokens']}/{run['output_tokens']}",
            _usd(run["usd"]),
            _usd(run["usd_avoided"]) if run["trips"] else "",
            _time(run["last_seen"]),
            f"{run['duration_s']:.1f}s",
        )
    return table


def _verdicts(step: dict[str, Any]) -> str:
    return ", ".join(f"{v['detector']}:{v['action']}" for v in step.get("verdicts") or [])


def _show(detail: dict[str, Any]) -> None:
    from rich.table import Table

    console = _console()
    console.print(_runs_table([detail["run"]]))
    start = detail["run"]["first_seen"]
    steps = Table(
        "#", "at", "agent", "model", "tokens in/out", "USD", "status", "tool calls", "verdicts", title="requests"
    )
    for step in detail["requests"]:
        status = f"blocked: {step['blocked_by']}" if step["blocked_by"] else str(step["status"] or step["error"] or "")
        steps.add_row(
            str(step["index"]),
            f"+{step['at'] - start:.1f}s",
            step["agent"],
            step["model"],
            f"{step['input_tokens']}/{step['output_tokens']}",
            _usd(step["usd"]),
            status,
            ", ".join(step["tool_calls"]) + (f" -> {step['handoff_to']}" if step["handoff_to"] else ""),
            _verdicts(step),
        )
    console.print(steps)
    if detail["trips"]:
        trips = Table("request", "detector", "action", "reason", "USD so far", "avoided (est.)", title="trips")
        for trip in detail["trips"]:
            trips.add_row(
                str(trip["request_index"]),
                trip["detector"],
                trip["action"],
                trip["reason"],
                _usd(trip["usd_so_far"]),
                _usd(trip["usd_avoided"]),
            )
        console.print(trips)


def register(app: typer.Typer) -> None:
    @app.command()
    def runs(
        limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs (newest first).")] = 20,
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """Recent runs from the record store: status, requests, agents, spend."""
        found = _read(load(config).settings, lambda reader: reader.recent_runs(limit))
        if as_json:
            _echo_json(found)
            return
        if not found:
            typer.echo("no runs recorded yet")
            return
        _console().print(_runs_table(found))

    @app.command()
    def show(
        run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to show.")],
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """One run: its totals, the timeline of its requests, and its trips."""
        detail = _read(load(config).settings, lambda reader: reader.run_detail(run_id))
        if detail is None:
            raise _fail(f"no run {run_id!r} in the record store")
        if as_json:
            _echo_json(detail)
            return
        _show(detail)

    @app.command()
    def trips(
        since_hours: Annotated[
            float | None, typer.Option("--since-hours", min=0, help="Only trips of the last N hours.")
        ] = None,
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """Trips by detector: how often each tripped or warned, in how many runs, and the cost it avoided."""
        import time

        since = time.time() - since_hours * 3600 if since_hours is not None else None
        rows = _read(load(config).settings, lambda reader: reader.trips_by_detector(since))
        if as_json:
            _echo_json(rows)
            return
        if not rows:
            typer.echo("no trips recorded")
            return
        from rich.table import Table

        table = Table("detector", "trips", "warnings", "runs", "USD avoided (est.)", "last")
        for row in rows:
            table.add_row(
                row["detector"],
                str(row["trips"]),
                str(row["warnings"]),
                str(row["runs"]),
                _usd(row["usd_avoided"]),
                _time(row["last_at"]),
            )
        _console().print(table)

    @app.command()
    def replay(
        file: Annotated[
            Path | None,
            typer.Argument(exists=True, dir_okay=False, help="Recorded exchanges, one JSON object per line."),
        ] = None,
        from_db: Annotated[
            bool, typer.Option("--from-db", help="Replay the traffic in the store (store.record_bodies).")
        ] = False,
        run: Annotated[str | None, typer.Option("--run", help="With --from-db: only this run.")] = None,
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """Run the detectors (settings from --config) over recorded traffic: what would have tripped where."""
        if (file is None) == (not from_db):
            raise _fail("name either a FILE or --from-db", 2)
        _replay(load(config).settings, file, run, as_json)


def _replay(settings: Settings, file: Path | None, run: str | None, as_json: bool) -> None:
    from runguard.detectors.registry import default_detectors
    from runguard.proxy.store.replay import ReplayReport, from_rows, read_file, replay

    if file is not None:
        try:
            exchanges = read_file(file)
        except (OSError, ValueError) as exc:
            raise _fail(str(exc)) from exc
        report = asyncio.run(replay(exchanges, settings, default_detectors()))
    else:

        async def from_store(reader: Any) -> ReplayReport:
            return await replay(from_rows(reader.recorded(run)), settings, default_detectors())

        report = _read(settings, from_store)
        if not report.runs and not report.skipped:
            raise _fail("the store holds no recorded traffic (turn on store.record_bodies to record it)")
    if as_json:
        _echo_json(report.as_json())
        return
    _print_replay(report)


def _print_replay(report: Any) -> None:
    from rich.table import Table

    table = Table("run", "requests", "USD", "would stop at", "detector", "reason", "avoided", title="replay")
    for run in report.runs.values():
        stopped = run.stopped_at is not None
        table.add_row(
            run.run_id,
            f"{run.requests} ({run.unanswered} unanswered)" if run.unanswered else str(run.requests),
            _usd(run.usd),
            f"request {run.stopped_at}" if stopped else "-",
            run.detector or "",
            run.reason or "",
            f"{run.avoided_requests} requests, {_usd(run.avoided_usd)}" if stopped else "",
        )
    console = _console()
    console.print(table)
    warnings = [t for t in report.trips if t.action == "warn"]
    if warnings:
        console.print(f"warnings: {', '.join(sorted({t.detector for t in warnings}))} ({len(warnings)} in all)")
    if report.skipped:
        console.print(f"{report.skipped} exchanges skipped (not a chat, responses or gemini request, or unreadable)")
