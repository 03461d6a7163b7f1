"""Tables that fit a width without cutting ids, and `--since` values, as the read commands use them."""

from __future__ import annotations

import datetime

import pytest
import typer
from rich.console import Console

from runguard.proxy.cli.render import Column, print_fitted, since

COLUMNS = [
    Column("run", lambda r: r["id"], whole=True),
    Column("status", lambda r: r["status"], priority=100),
    Column("USD", lambda r: r["usd"], priority=90, one_line=True),
    Column("agents", lambda r: r["agents"], priority=50),
]


def rendered(rows: list[dict[str, str]], width: int) -> list[str]:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    print_fitted(console, COLUMNS, rows)
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [40, 80, 120])
def test_ids_stay_whole_and_the_table_fits(width: int) -> None:
    rows = [
        {"id": "run-" + "x" * 30, "status": "tripped: non_progress", "usd": "$0.1234", "agents": "planner, coder"},
        {"id": "[red]r[/red]", "status": "completed", "usd": "$0.0001", "agents": "writer"},
    ]
    lines = rendered(rows, width)
    assert max(len(line) for line in lines) <= width
    for row in rows:
        assert any(row["id"] in line for line in lines)
    assert ("USD" in lines[0]) == (width >= 80)  # dropped when it cannot fit, never squeezed
    assert not any("$0.12\n" in line or line.endswith("$0.1") for line in lines)


def test_an_id_wider_than_the_terminal_is_printed_whole_all_the_same() -> None:
    long_id = "r" * 70
    lines = rendered([{"id": long_id, "status": "completed", "usd": "$0", "agents": ""}], 50)
    assert any(long_id in line for line in lines)
    assert "status" not in lines[0]  # every other column gave way


def test_since_takes_spans_and_iso_dates() -> None:
    now = 1_800_000_000.0
    assert since("30m", now) == now - 1800
    assert since("1h", now) == now - 3600
    assert since("2d", now) == now - 2 * 86400
    assert since("1w", now) == now - 604800
    assert since(None, now) is None
    assert since("2026-11-28", now) == datetime.datetime(2026, 11, 28).timestamp()
    assert (
        since("2026-11-28T09:30:00+00:00", now)
        == datetime.datetime(2026, 11, 28, 9, 30, tzinfo=datetime.UTC).timestamp()
    )
    with pytest.raises(typer.BadParameter):
        since("yesterday", now)
