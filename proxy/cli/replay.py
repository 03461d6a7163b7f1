"""`runguard-proxy replay | export`: recorded traffic through the detectors, and out of the store.

`export` writes the store's recorded traffic (store.record_bodies) as the
JSON-lines file `replay FILE` reads (docs/records.md). `replay` reads a file,
a folder of such files (a corpus: each file replayed over fresh state, one
after another) or the store, and reports the runs it would stop and, per
detector, its stops and the share of responses it warned on. It shows a
progress bar on stderr, only when stderr is a terminal (pipes and scripts get
no bar).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.text import Text

from runguard.config import Settings
from runguard.proxy.cli.loading import ConfigOption, load
from runguard.proxy.cli.render import Column, console, echo_json, fail, print_fitted, since, usd
from runguard.proxy.cli.store import JsonOption, SinceOption, read_store

if TYPE_CHECKING:
    from runguard.proxy.store import StoreReader

NO_BODIES = "turn on store.record_bodies (RUNGUARD_RECORD_BODIES=1) to record request and response bodies"


@contextlib.contextmanager
def _progress() -> Iterator[Progress]:
    """A progress display on stderr, silent unless stderr is a terminal; gone once done."""
    err = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, disable=not err.is_terminal, transient=True) as progress:
        yield progress


def _from_file(settings: Settings, file: Path, run: str | None) -> Any:
    from runguard.detectors.registry import default_detectors
    from runguard.proxy.guard import read_file, replay

    with _progress() as progress:
        size = file.stat().st_size
        reading = progress.add_task(f"reading {file.name}", total=size)
        try:
            exchanges = read_file(file, run, lambda n: progress.advance(reading, n))
        except (OSError, ValueError) as exc:
            raise fail(str(exc)) from exc
        progress.remove_task(reading)
        if run is not None and not exchanges:
            raise fail(f"no run {run!r} in {file}")
        feeding = progress.add_task("replaying", total=len(exchanges))
        return asyncio.run(replay(exchanges, settings, default_detectors(), lambda: progress.advance(feeding)))


def _from_folder(settings: Settings, folder: Path, run: str | None) -> tuple[Any, Any]:
    """Every `*.jsonl` under `folder` (sorted), each replayed over fresh state: one report of all their
    runs, and the summary of them."""
    from runguard.detectors.registry import default_detectors
    from runguard.proxy.guard import ReplayReport, Summary, read_file, replay

    files = sorted(folder.rglob("*.jsonl"))
    if not files:
        raise fail(f"no *.jsonl file under {folder}")
    merged, summary = ReplayReport(), Summary()
    with _progress() as progress:
        feeding = progress.add_task(f"replaying {folder.name}", total=len(files))
        for file in files:
            try:
                exchanges = read_file(file, run)
            except (OSError, ValueError) as exc:
                raise fail(str(exc)) from exc
            report = asyncio.run(replay(exchanges, settings, default_detectors()))
            summary.add(report, str(file.relative_to(folder)))
            merged.runs.update(report.runs)
            merged.trips.extend(report.trips)
            merged.skipped += report.skipped
            progress.advance(feeding)
    if run is not None and not merged.runs:
        raise fail(f"no run {run!r} under {folder}")
    return merged, summary


def _from_store(settings: Settings, run: str | None) -> Any:
    from runguard.detectors.registry import default_detectors
    from runguard.proxy.guard import ReplayReport, from_rows, replay

    async def query(reader: StoreReader) -> ReplayReport:
        total = await reader.recorded.count(run)
        if total == 0:
            if run is None:
                raise fail(f"the store holds no recorded traffic ({NO_BODIES})")
            if await reader.runs.one(run) is None:
                raise fail(f"no run {run!r} in the record store")
            raise fail(f"run {run!r} is in the store but its traffic was not recorded ({NO_BODIES})")
        with _progress() as progress:
            feeding = progress.add_task("replaying", total=total)
            exchanges = from_rows(reader.recorded.exchanges(run))
            return await replay(exchanges, settings, default_detectors(), lambda: progress.advance(feeding))

    return read_store(settings, query)


def _spent(value: float, unpriced: int) -> str:
    """A replayed spend: `$0.0123`, `$0.0123 + 2 unpriced`, or `2 unpriced` alone (never `$0.0000`)."""
    if not unpriced:
        return usd(value)
    return f"{usd(value)} + {unpriced} unpriced" if value > 0 else f"{unpriced} unpriced"


def _print_summary(summary: Any) -> None:
    out = console()
    rows = [
        {
            "detector": name,
            "stops": str(len(figures.stops)),
            "warned": f"{figures.warned_responses} ({summary.share(figures.warned_responses):.1%})",
            "nudged": str(figures.nudged_responses),
        }
        for name, figures in sorted(summary.detectors.items())
    ]
    columns = [
        Column("detector", lambda r: r["detector"], whole=True),
        Column("sessions stopped", lambda r: r["stops"], priority=100, right=True),
        Column("responses warned", lambda r: r["warned"], priority=90, right=True, one_line=True),
        Column("nudged", lambda r: r["nudged"], priority=50, right=True),
    ]
    if rows:
        print_fitted(out, columns, rows, title="per detector")
    stopped = len({stop.run_id for stop in summary.stops})
    out.print(
        Text(
            f"{summary.sessions} sessions, {summary.calls} calls: {stopped} sessions stopped, "
            f"{summary.warned_responses} of {summary.responses} responses warned "
            f"({summary.share(summary.warned_responses):.1%})"
            + (f", {summary.unpriced} unpriced (no price for their model)" if summary.unpriced else "")
        )
    )


def _print_replay(report: Any, only_stopped: bool = False) -> None:
    rows = [
        {
            "run": run.run_id,
            "requests": f"{run.requests} ({run.unanswered} unanswered)" if run.unanswered else str(run.requests),
            "usd": _spent(run.usd, run.unpriced),
            "stop": f"request {run.stopped_at}" if run.stopped_at is not None else "-",
            "of": str(run.requests + run.avoided_requests),
            "detector": run.detector or "",
            "reason": run.reason or "",
            "avoided": f"{run.avoided_requests} req, {_spent(run.avoided_usd, run.avoided_unpriced)}"
            if run.stopped_at is not None
            else "",
        }
        for run in report.runs.values()
        if not only_stopped or run.stopped_at is not None
    ]
    columns = [
        Column("run", lambda r: r["run"], whole=True),
        Column("would stop at", lambda r: r["stop"], priority=100, one_line=True),
        Column("of", lambda r: r["of"], priority=95, right=True),
        Column("detector", lambda r: r["detector"], priority=90),
        Column("requests", lambda r: r["requests"], priority=80, right=True),
        Column("USD", lambda r: r["usd"], priority=70, right=True, one_line=True),
        Column("avoided", lambda r: r["avoided"], priority=60),
        Column("reason", lambda r: r["reason"], priority=50),
    ]
    out = console()
    if rows:
        print_fitted(out, columns, rows, title="replay")
    if report.skipped:
        out.print(f"{report.skipped} exchanges skipped (not a chat, responses or gemini request, or unreadable)")


def register(app: typer.Typer) -> None:
    @app.command()
    def replay(
        file: Annotated[
            Path | None,
            typer.Argument(
                exists=True,
                help="Recorded exchanges, one JSON object per line; or a folder of such files (*.jsonl, "
                "searched through), each replayed over fresh state.",
            ),
        ] = None,
        from_db: Annotated[
            bool, typer.Option("--from-db", help="Replay the traffic in the store (store.record_bodies).")
        ] = False,
        run: Annotated[str | None, typer.Option("--run", help="Only this run (of the file or the store).")] = None,
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """Run the detectors (settings from --config) over recorded traffic: what would have tripped where,
        and per detector the sessions it would stop and the share of responses it warned on."""
        from runguard.proxy.guard import Summary

        if (file is None) == (not from_db):
            raise fail("name either a FILE or --from-db", 2)
        settings = load(config).settings
        folder = file is not None and file.is_dir()
        if file is not None and folder:
            report, summary = _from_folder(settings, file, run)
        else:
            report = _from_file(settings, file, run) if file is not None else _from_store(settings, run)
            summary = Summary()
            summary.add(report)
        if as_json:
            echo_json({**report.as_json(), "summary": summary.as_json()})
            return
        _print_replay(report, only_stopped=folder)
        _print_summary(summary)

    @app.command()
    def export(
        run: Annotated[str | None, typer.Option("--run", help="Only this run.")] = None,
        since_text: SinceOption = None,
        output: Annotated[
            Path | None, typer.Option("--output", "-o", dir_okay=False, help="Write here instead of stdout.")
        ] = None,
        config: ConfigOption = None,
    ) -> None:
        """Write the store's recorded traffic as JSON lines, the format `replay FILE` reads (docs/records.md)."""
        import time

        from runguard.proxy.store.export import export as write

        start = since(since_text, time.time())
        settings = load(config).settings

        async def query(reader: StoreReader) -> tuple[int, set[str]]:
            if output is None:
                return await write(reader.recorded.exchanges(run, start), sys.stdout.buffer)
            with output.open("wb") as out:
                return await write(reader.recorded.exchanges(run, start), out)

        sys.stdout.flush()
        written, runs = read_store(settings, query)
        if written == 0:
            if output is not None:
                output.unlink(missing_ok=True)
            what = f"run {run!r}" if run is not None else "any run"
            raise fail(f"no recorded traffic of {what} in the store{' in that time' if start else ''} ({NO_BODIES})")
        if output is not None:
            typer.echo(f"exported {written} exchanges of {len(runs)} runs to {output}", err=True)
