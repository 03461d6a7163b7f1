"""`runguard-proxy detectors`: the detector catalogue with defaults, as Markdown."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("detectors")
    def detectors() -> None:
        """Print every detector, what it catches, and its settings with defaults."""
        from runguard.detectors.catalogue import render

        typer.echo(render(), nl=False)  # render() ends with its newline: the output is docs/detectors.md
