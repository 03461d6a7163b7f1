"""Terminal output shared by the read commands: a console, tables that fit, client text kept literal.

Tables fit the console's width by dropping their least important columns,
never by cutting a cell that must stay whole (a run id, to be copied into
`show`): such a column is `whole` and never wraps. Every cell is a rich
`Text`, so client-chosen text (run ids, agent and model names) is printed as
it is, never read as rich markup (`[bold]`, `[link=...]`) or emoji codes.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import typer
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

PIPED_WIDTH = 200  # piped output without COLUMNS: a wide page, nothing folded for grep


def console() -> Console:
    """The console read commands print to: the terminal's width, COLUMNS when set, a wide page when piped."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console(highlight=False)
    return Console(highlight=False, width=PIPED_WIDTH)


def echo_json(payload: Any) -> None:
    typer.echo(orjson.dumps(payload, default=str, option=orjson.OPT_INDENT_2).decode())


def fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"runguard-proxy: {message}", err=True)
    return typer.Exit(code)


@dataclass(frozen=True, slots=True)
class Column:
    """One table column: its header, how a row's cell reads, and how it may be laid out."""

    header: str
    cell: Callable[[dict[str, Any]], str]
    priority: int = 0  # lower goes first when the table must narrow; `whole` columns are never dropped
    whole: bool = False  # never wrapped, never cut, never dropped (ids)
    one_line: bool = False  # never wrapped (short figures such as `5m ago`), but may be dropped
    right: bool = False


def fitted(columns: Sequence[Column], rows: Sequence[dict[str, Any]], width: int, title: str | None = None) -> Table:
    """A table of `rows` no wider than `width` when it can be.

    Each column needs at least its longest word (a `whole` column: its longest cell); while those
    needs and the table's borders exceed `width`, the lowest-priority column is dropped. The width
    left over goes to the columns, most important first, up to their longest cell; cells wrap only
    between words. Widths are fixed before rich lays the table out, so rich never folds a word.
    """
    cells = {id(column): [column.cell(row) for row in rows] for column in columns}
    shown = list(columns)
    while True:
        needs = {id(c): _need(c, cells[id(c)]) for c in shown}
        table = _table(shown, cells, needs, title)
        total = Measurement.get(_WIDE, _WIDE.options, table).maximum
        droppable = [c for c in shown if not c.whole]
        if total <= width or not droppable:
            break
        shown.remove(min(droppable, key=lambda c: c.priority))
    spare = width - total
    for column in sorted(shown, key=lambda c: (not c.whole, -c.priority)):
        longest = max((cell_len(text) for text in [column.header, *cells[id(column)]]), default=0)
        grow = max(0, min(spare, longest - needs[id(column)]))
        needs[id(column)] += grow
        spare -= grow
    return _table(shown, cells, needs, title)


_WIDE = Console(width=100_000)


def print_fitted(
    out: Console, columns: Sequence[Column], rows: Sequence[dict[str, Any]], title: str | None = None
) -> None:
    """Print `fitted(...)` at the console's width; wider only when the `whole` cells alone are wider
    (an id longer than the terminal is still printed whole: the terminal wraps it, nothing cuts it)."""
    table = fitted(columns, rows, out.width, title)
    needed = Measurement.get(_WIDE, _WIDE.options, table).maximum
    if needed <= out.width:
        out.print(table)
        return
    width = out.width
    out.width = needed  # rich clamps print(width=...) to the console's own width
    try:
        out.print(table, crop=False)
    finally:
        out.width = width


def _need(column: Column, cells: list[str]) -> int:
    """The narrowest a column may be: its longest word, or its longest cell when it must stay whole."""
    kept = column.whole or column.one_line
    words = [w for text in cells for w in ([text] if kept else text.split())]
    return max((cell_len(w) for w in [*words, *column.header.split()]), default=1)


def _table(columns: Sequence[Column], cells: dict[int, list[str]], widths: dict[int, int], title: str | None) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), title=title, title_justify="left")
    for column in columns:
        table.add_column(
            column.header,
            width=widths[id(column)],
            no_wrap=column.whole,
            overflow="ignore" if column.whole else "fold",
            justify="right" if column.right else "left",
        )
    count = len(next(iter(cells.values()), []))
    for index in range(count):
        table.add_row(*(Text(cells[id(column)][index]) for column in columns))
    return table


def usd(value: float | None) -> str:
    return f"${value or 0.0:.4f}"


def when(epoch: float | None) -> str:
    """Local date and time of an epoch, to the second."""
    if epoch is None:
        return ""
    return datetime.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


def ago(epoch: float | None, now: float) -> str:
    """How long ago, in the largest unit that fits: 12s, 5m, 3h, 2d."""
    if epoch is None:
        return ""
    seconds = max(0.0, now - epoch)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"


_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since(text: str | None, now: float) -> float | None:
    """Epoch seconds from a `--since` value: a span back from now (`30m`, `1h`, `2d`, `1w`, `45s`) or an
    ISO date or time (`2026-11-28`, `2026-11-28T09:30`; local time unless it names a zone).
    Raises typer.BadParameter for anything else."""
    if text is None:
        return None
    span = _SPAN.match(text)
    if span:
        return now - float(span.group(1)) * _UNITS[span.group(2)]
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise typer.BadParameter(
            f"{text!r}: expected a span such as 30m, 1h, 2d, or an ISO date such as 2026-11-28"
        ) from exc
    return moment.timestamp()  # a naive time is local time
