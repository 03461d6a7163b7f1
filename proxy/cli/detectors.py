"""`runguard-proxy detectors [NAME]`: the detector catalogue, or one detector, as terminal text.

The text comes from the registry (`runguard.detectors.registry.catalogue`): what each
detector catches and its settings with defaults. `--markdown` prints the
catalogue as Markdown (it is `docs/detectors.md`), `--json` as data.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.padding import Padding
from rich.text import Text

from runguard.detectors.registry import Entry, entries, render
from runguard.proxy.cli.render import Column, console, echo_json, fail, fitted


def _rendered(item: Entry, width: int) -> Group:
    rows = [
        {"setting": s.name, "default": json.dumps(s.default), "description": s.description, "tight": s.tightenable}
        for s in item.settings
    ]
    columns = [
        Column("setting", lambda r: r["setting"], whole=True),
        Column("default", lambda r: r["default"], priority=90),
        Column("", lambda r: r["description"] + (" (tightenable)" if r["tight"] else ""), priority=80),
    ]
    return Group(
        Text(item.name, style="bold underline"),
        Padding(Text(item.summary.removeprefix(f"`{item.name}`: ")), (0, 0, 0, 2)),
        Padding(fitted(columns, rows, width - 2), (0, 0, 0, 2)),
    )


def register(app: typer.Typer) -> None:
    @app.command("detectors")
    def detectors(
        name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="One detector (e.g. spiral).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
        markdown: Annotated[
            bool, typer.Option("--markdown", help="The catalogue as Markdown (docs/detectors.md).")
        ] = False,
    ) -> None:
        """Every detector (or the one named): what it catches, and its settings with defaults."""
        if markdown:
            typer.echo(render(), nl=False)  # render() ends with its newline: the output is docs/detectors.md
            return
        found = entries()
        if name is not None:
            found = [item for item in found if item.name == name]
            if not found:
                known = ", ".join(item.name for item in entries())
                raise fail(f"no detector {name!r} (known: {known})", 2)
        if as_json:
            echo_json([dataclasses.asdict(item) for item in found])
            return
        out: Console = console()
        if name is None:
            out.print(
                Text(
                    "Every detector has `action` (block, warn, off) and `response` (error: a 429 the SDK does not "
                    "retry; stop: a normal completion that ends the agent's turn). Set them under "
                    "guard.detectors.<name>, per key or model under guard.overrides; `runguard-proxy config show` "
                    "shows the values in effect.\n"
                )
            )
        for item in found:
            out.print(_rendered(item, out.width))
            out.print()
