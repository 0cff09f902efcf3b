"""CLI command ``edgefl plot``: overlay runs (accuracy vs simulated time, vs energy, vs round) in one HTML page.

    edgefl plot RUN_DIR [RUN_DIR ...] [--out overlay.html] [--title TEXT]

Each RUN_DIR is a directory written by ``edgefl run``; traces are labelled "<name> (<method>, seed <seed>)".
Prints the path written. A bad run directory or output path prints one ``error: ...`` line on stderr and exits
with code 2 (see :mod:`edgefl.output.comparison`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edgefl.cli._common import user_errors

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the top-level ``plot`` command to ``app``."""

    @app.command("plot")
    def plot(
        run_dirs: Annotated[
            list[Path], typer.Argument(
                metavar="RUN_DIR", help="Run directories written by `edgefl run` (one or more).", show_default=False
            )
        ],
        out: Annotated[Path, typer.Option("--out", help="HTML file to write.")] = Path("overlay.html"),
        title: Annotated[
            Optional[str], typer.Option("--title", help="Page title.", show_default="edgefl overlay of N runs")
        ] = None,
    ) -> None:
        """Overlay runs in one HTML page: accuracy vs simulated time, vs energy and vs round.

        One curve per run, labelled "<name> (<method>, seed <seed>)"; the loss if no run has a test accuracy."""
        from edgefl.output.comparison import write_overlay

        with user_errors():
            path = write_overlay(run_dirs, out, title=title)
        typer.echo(str(path))
