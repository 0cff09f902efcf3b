"""Helpers shared by the command modules: the one-line error exit, option names in optimizer messages and a
strict numeric CSV reader."""

from __future__ import annotations

import csv
import math
from contextlib import contextmanager
from pathlib import Path

import typer

__all__ = ["fail", "user_errors", "option_names", "read_numeric_csv"]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr as one line and return the exit exception to raise (code 2 by default)."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code)


@contextmanager
def user_errors():
    """Turn the project's validation errors into one line + exit code 2 (no traceback)."""
    from channel.errors import ChannelInputError
    from edgefl.errors import EdgeflError
    from optimizers.errors import OptimizerInputError

    try:
        yield
    except (EdgeflError, ChannelInputError, OptimizerInputError) as exc:
        raise fail(str(exc)) from None


def option_names(message: str, options: dict[str, str]) -> str:
    """Name the CLI option in an optimizer message: with ``options`` mapping ``t_max_s`` to ``--t-max-s``,
    "t_max_s=-1.0: ..." becomes "--t-max-s=-1.0: ..."; other messages are returned as they are."""
    field, sep, rest = message.partition("=")
    return options[field] + sep + rest if sep and field in options else message


def read_numeric_csv(
    path: Path, columns: tuple[str, ...], option: str, *, rows_are: str = "data"
) -> tuple[dict[str, list[float]], list[int]]:
    """The named columns of a CSV with a header (names matched case-insensitively, any order, extra columns
    ignored, blank lines skipped) as finite floats, and the file line number of each data row.

    Every problem raises :func:`fail` with the option, the file, the line and the column.
    """
    where = f"{option} {str(path)!r}"
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = [(number, row) for number, row in enumerate(csv.reader(handle), start=1)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise fail(f"{where}: cannot read: {exc}") from None
    rows = [(number, row) for number, row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise fail(f"{where}: empty file; expected a header {','.join(columns)}")
    header = [cell.strip().lower() for cell in rows[0][1]]
    missing = [name for name in columns if name.lower() not in header]
    if missing:
        raise fail(f"{where}: missing column(s) {', '.join(missing)}; expected columns {', '.join(columns)}")
    if len(rows) == 1:
        raise fail(f"{where}: no {rows_are} rows after the header")
    index = {name: header.index(name.lower()) for name in columns}
    values: dict[str, list[float]] = {name: [] for name in columns}
    for number, row in rows[1:]:
        for name in columns:
            cell = row[index[name]].strip() if index[name] < len(row) else ""
            try:
                value = float(cell)
            except ValueError:
                raise fail(f"{where} line {number}: {name}={cell!r}: must be a number") from None
            if not math.isfinite(value):
                raise fail(f"{where} line {number}: {name}={cell!r}: must be finite")
            values[name].append(value)
    return values, [number for number, _ in rows[1:]]
